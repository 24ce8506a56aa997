// capture: a graph recorded on a one-token dummy batch at the stable bound
// (or on a batch of zero lengths) replays correctly for every later batch
// written into the same buffers, and each replay writes, bitwise, what a
// plain call on the same batch writes. A failure's replay line scores the
// case through a graph (fixtures check --capture).
#include "ctxscore/bits.hpp"
#include "ctxscore/harness/case_builder.hpp"
#include "drawn_case.hpp"

namespace ctxscore::harness {

namespace {

struct CaptureDraw {
  Case dummy;
  std::vector<Case> reals;  // later batches of the dummy's shapes
};

// A real batch with the dummy's shapes (B, H, QL, world, rank, S, P, table width).
Case real_batch(const Case& shape) {
  Case c = shape;
  c.name = "capture_replay";
  c.seed = *rc::gen::arbitrary<std::uint32_t>();
  for (std::int32_t& len : c.seq_lens) len = *gen::genSeqLen(c.max_seq_len, c.query_len);
  c.block_table = *gen::genPageTable(c.batch(), c.table_width, c.pages);
  gen::poison_past_reach(c);
  return c;
}

// Half the graphs write into a larger `out` of any stride order (feature-major
// among them), which every replay then writes through.
Case dummy_shape() {
  const std::int64_t heads = *rc::gen::element<std::int64_t>(1, 4, 16);
  const std::int64_t world = *rc::gen::element<std::int64_t>(1, 4, 16);
  Case c = CaseBuilder("capture_dummy")
      .heads(heads).query_len(*rc::gen::element<std::int64_t>(1, 4)).world(world)
      .rank(*rc::gen::inRange<std::int64_t>(0, world))
      .bound(*rc::gen::element<std::int64_t>(4096, 32768, 65536)).pages(32)
      // One token each, or none: capturing on all-zero lengths must not read out of bounds either.
      .lens(std::vector<std::int32_t>(static_cast<std::size_t>(*rc::gen::inRange(1, 17)), *rc::gen::element(0, 1)))
      .table(every_entry(0))
      .build();
  if (*rc::gen::element(false, true)) gen::genOutLayout(c);
  return c.resolved();
}

Verdict raised(const Case& c, const std::string& what, const std::exception& e) {
  Verdict v;
  v.spec = c;
  v.backend = "replay";
  v.oracle = oracle_name(Oracle::reference);
  v.fail(fault_of(e), what + ": " + e.what());
  return v;
}

}  // namespace

Verdict judge_replay(CapturedScore& g, Case real, std::int64_t bound, Scored* replayed) {
  Verdict v;
  v.spec = real;
  v.backend = "replay";
  v.oracle = oracle_name(Oracle::reference);
  HostCase host = laid_out(real);
  const std::vector<float> before = host.out;
  Scored s;
  try {
    s = g.replay(host);
  } catch (const std::exception& e) {
    v.fail(fault_of(e), std::string("replay raised: ") + e.what());
    return v;
  }
  real.max_seq_len = bound;
  HostCase judged = laid_out(real);
  judge_scored(v, judged, before, s, oracle_scores(Oracle::reference, judged));
  if (replayed) *replayed = std::move(s);
  return v;
}

namespace {

Suite run(Backend& b, const CheckContext& x) {
  const CheckOptions& o = x.drawn;
  JudgeOptions through_graph;
  through_graph.capture = true;
  const std::string flags = replay_flags(b, through_graph);
  Suite absent = suite_for("capture", b, oracle_name(Oracle::reference));
  const Capabilities& has = b.capabilities();
  try {
    if (has.capture_raised) std::rethrow_exception(has.capture_raised);
  } catch (const BackendError& e) {
    Verdict v;
    v.spec = CaseBuilder("capture_probe").lens({1}).build();
    v.backend = b.name();
    v.fail(fault_of(e), e.what());
    absent.add("the capture probe", v, write_failure_fixture(v.spec, FailureRecord{"capture", 0, std::nullopt, false, b.toolchain()}, flags));
    return absent;
  }
  if (!has.capture.empty()) {
    absent.not_run = has.capture;
    return absent;
  }
  CampaignSteps<CaptureDraw> steps;
  steps.check = "capture";
  steps.draw = [](std::uint64_t seed, int size) {
    return rc::gen::exec([] {
      CaptureDraw d;
      d.dummy = dummy_shape();
      for (int k = 0; k < 3; ++k) d.reals.push_back(real_batch(d.dummy));
      return d;
    })(rc::Random(seed), size);
  };
  steps.judge = [&b, flags](const CaptureDraw& d) -> Trial {
    HostCase host = laid_out(d.dummy);
    std::unique_ptr<CapturedScore> g;
    try {
      g = b.capture(host, d.dummy.max_seq_len);
    } catch (const std::exception& e) {
      return Trial{raised(d.dummy, "capture raised", e), flags};
    }
    if (!g) return Trial{raised(d.dummy, "capture", BackendError("recorded no graph after the probe did")), flags};
    Verdict first;
    for (std::size_t k = 0; k < d.reals.size(); ++k) {
      Scored replayed;
      Verdict v = judge_replay(*g, d.reals[k], d.dummy.max_seq_len, &replayed);
      if (!v.ok()) {
        v.error = v.error.empty() ? v.error : "replay " + std::to_string(k) + ": " + v.error;
        return Trial{v, flags};
      }
      if (k > 0) continue;
      first = v;
      // The first replay against a plain call of the same batch, bitwise.
      HostCase plain = laid_out(d.reals[k]);
      std::vector<float> b_out;
      try {
        b_out = b.score(plain, OutMode::given).out;
      } catch (const std::exception& e) {
        return Trial{raised(d.reals[k], "plain call raised", e), flags};
      }
      if (b_out.size() != replayed.out.size()) {
        v.fail(Fault::replay_differs, "the replay's out holds " + std::to_string(replayed.out.size()) +
                                          " elements, a plain call's " + std::to_string(b_out.size()));
        return Trial{v, flags};
      }
      for (std::size_t e = 0; e < b_out.size(); ++e)
        if (float_bits(b_out[e]) != float_bits(replayed.out[e])) {
          v.fail(Fault::replay_differs, "the replay and a plain call differ at element " + std::to_string(e) + " of out: " +
                         std::to_string(replayed.out[e]) + " vs " + std::to_string(b_out[e]),
                 {{"real_batch", std::to_string(k)}, {"element", std::to_string(e)}});
          return Trial{v, flags};
        }
    }
    return Trial{first, flags};
  };
  return run_campaign(b, o.campaign, steps, oracle_name(Oracle::reference));
}

}  // namespace

CheckDef capture_check() {
  return {"capture", "a graph recorded on a dummy batch replays later batches right, bitwise as plain calls", 2,
          {Need::capture}, oracle_name(Oracle::reference), false, false, run};
}

}  // namespace ctxscore::harness

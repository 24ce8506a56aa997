#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/phases.hpp"

#include "ctxscore/bits.hpp"
#include "ctxscore/contract.hpp"

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace ctxscore::harness {

namespace {

// Where two calls' dense scores differ in their bits: "" when nowhere, else
// how many elements and the first, by request, token, head and slot.
std::string bits_differ(const std::vector<float>& first, const std::vector<float>& again, const Case& c) {
  const std::int64_t T = c.tokens(), L = c.local();
  std::int64_t n = 0, at = -1;
  for (std::size_t e = 0; e < first.size(); ++e)
    if (float_bits(first[e]) != float_bits(again[e])) {
      ++n;
      if (at < 0) at = static_cast<std::int64_t>(e);
    }
  if (n == 0) return "";
  const std::int64_t h = at / (T * L), row = at / L % T, j = at % L;
  char bits[64];
  std::snprintf(bits, sizeof bits, "0x%08x, then 0x%08x", float_bits(first[static_cast<std::size_t>(at)]),
                float_bits(again[static_cast<std::size_t>(at)]));
  return std::to_string(n) + " of " + std::to_string(first.size()) + " elements differ; first at request " +
         std::to_string(row / c.query_len) + " token " + std::to_string(row % c.query_len) + " head " + std::to_string(h) +
         " slot " + std::to_string(j) + ": " + bits;
}

// One call of the backend: what it returned, or the error it raised into `v`.
std::optional<Scored> call(Verdict& v, Backend& b, HostCase& host) {
  try {
    return b.score(host, v.out);
  } catch (const ContractError& e) {
    v.fail(Fault::raised, std::string("rejected the call (") + clause_name(e.clause()) + "): " + e.what(),
           {{"clause", clause_name(e.clause())}});
  } catch (const std::exception& e) {
    v.fail(fault_of(e), e.what());
  }
  return std::nullopt;
}

// Runs the backend on `host` `repeat` times and judges what the first call
// returned against `expected`, each later one against the first's bits.
void run_into(Verdict& v, Backend& b, HostCase& host, const ShardScores& expected, int repeat,
              std::vector<float>* scores) {
  const std::vector<float> before = host.out;
  const std::optional<Scored> s = call(v, b, host);
  if (!s) return;
  judge_scored(v, host, before, *s, expected);
  if (!v.error.empty() || (repeat <= 1 && scores == nullptr)) return;
  try {
    std::vector<float> first = written_scores(*s, host);
    for (int k = 2; k <= repeat && v.invariance.empty(); ++k) {
      host.out = before;
      const std::optional<Scored> again = call(v, b, host);
      if (!again) return;
      const std::string d = bits_differ(first, written_scores(*again, host), host.spec);
      if (!d.empty())
        v.fail(Fault::not_repeatable, "not repeatable: call " + std::to_string(k) + " of " + std::to_string(repeat) + ": " + d,
               {{"call", std::to_string(k)}, {"calls", std::to_string(repeat)}, {"first_difference", d}});
    }
    if (scores != nullptr) *scores = std::move(first);
  } catch (const BackendError& e) {
    v.fail(fault_of(e), e.what());
  }
}

// The case as a real batch through a graph recorded on a dummy batch of its
// shapes at its bound (JudgeOptions::capture).
void replay_into(Verdict& v, Backend& b, HostCase& host, const ShardScores& expected) {
  Case dummy = host.spec;
  dummy.name = "capture_dummy";
  // Contents of its own: a replay that scores the recorded inputs instead of
  // the case's cannot match it by sharing them.
  dummy.seed = splitmix(host.spec.seed);
  std::fill(dummy.seq_lens.begin(), dummy.seq_lens.end(), 1);
  std::fill(dummy.block_table.begin(), dummy.block_table.end(), 0);
  HostCase recorded = laid_out(dummy);
  const std::vector<float> before = host.out;
  try {
    const auto graph = b.capture(recorded, host.spec.max_seq_len);
    if (!graph) {
      v.fail(Fault::raised, b.name() + " records no graph (a port's hello must offer `capture`)");
      return;
    }
    judge_scored(v, host, before, graph->replay(host), expected);
  } catch (const std::exception& e) {
    v.fail(fault_of(e), std::string("capture or replay raised: ") + e.what());
  }
}

}  // namespace

HostCase laid_out(const Case& c) {
  const PhaseClock clock(Phase::setup);
  return materialize(c);
}

void judge_scored(Verdict& v, const HostCase& host, const std::vector<float>& before, const Scored& s,
                  const ShardScores& expected) {
  const PhaseClock clock(Phase::judge);
  v.shape = s.shape;
  const auto size_error = [&](const char* what, std::size_t got, std::size_t want) {
    v.fail(Fault::raised, std::string("returned ") + what + " of " + std::to_string(got) + " elements, expected " +
                              std::to_string(want));
  };
  if (v.out == OutMode::given) {
    if (s.fresh) {
      v.fail(Fault::raised, "scored into a fresh buffer although the given out fits");
      return;
    }
    if (s.out.size() != before.size()) return size_error("an out allocation", s.out.size(), before.size());
    v.report = compare(expected, host.out_layout(), before.data(), s.out.data(), static_cast<std::int64_t>(s.out.size()));
    return;
  }
  if (!s.fresh) {
    v.fail(Fault::raised, std::string("returned no fresh scores for a call with out ") + out_mode_name(v.out));
    return;
  }
  v.report = compare_fresh(expected, s.fresh->data(), static_cast<std::int64_t>(s.fresh->size()));
  if (v.out == OutMode::too_small) {
    if (s.out.size() != before.size()) return size_error("the too-small out allocation", s.out.size(), before.size());
    check_untouched(v.report, before.data(), s.out.data(), static_cast<std::int64_t>(before.size()));
  }
}

namespace {
std::string out_mode_flags(OutMode m) { return m == OutMode::given ? "" : std::string(" --out-mode ") + out_mode_name(m); }
}  // namespace

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::none: return "mismatch";
    case Fault::raised: return "raised";
    case Fault::hung: return "hung";
    case Fault::out_of_contract: return "out_of_contract";
    case Fault::not_repeatable: return "not_repeatable";
    case Fault::batch_dependent: return "batch_dependent";
    case Fault::shard_mismatch: return "shard_mismatch";
    case Fault::selection: return "selection";
    case Fault::replay_differs: return "replay_differs";
    case Fault::refusal: return "refusal";
    case Fault::geometry: return "geometry";
    case Fault::untested: return "untested";
    case Fault::property: return "property";
  }
  return "unknown";
}

Fault fault_of(const std::exception& e) { return dynamic_cast<const BackendHung*>(&e) ? Fault::hung : Fault::raised; }

void Verdict::fail(Fault f, const std::string& text, const std::map<std::string, std::string>& fields) {
  fault = f;
  const bool across_calls = f == Fault::not_repeatable || f == Fault::batch_dependent || f == Fault::shard_mismatch ||
                            f == Fault::selection || f == Fault::replay_differs;
  (across_calls ? invariance : error) = text;
  details = fields;
}

std::string Verdict::str() const {
  std::ostringstream s;
  s << (ok() ? "ok" : "FAIL") << " [" << backend << " vs " << oracle << ", out " << out_mode_name(out);
  if (!shape.empty()) s << ", shape " << shape;
  s << "] ";
  if (!error.empty()) s << "error: " << error;
  else s << report.summary();
  if (!invariance.empty()) s << "; " << invariance;
  return s.str();
}

std::string explain_first_mismatch(const Verdict& v) {
  if (!v.report.first) return "";
  const Coordinates& at = v.report.first->at;
  const Case& c = v.spec;
  if (at.request < 0 || at.request >= c.batch() || at.token < 0 || at.block < 0) return "";
  const std::int64_t len = c.seq_lens[static_cast<std::size_t>(at.request)];
  const std::int64_t cutoff = causal_cutoff(len, c.query_len, at.token);
  const std::int64_t first = at.block * kBlockTokens, seen = qualifying_prefix(at.block, cutoff);
  std::ostringstream o;
  o << "request " << at.request << ": length " << len << ", QL " << c.query_len << "; token " << at.token << " (head "
    << at.head << ") sees positions < " << cutoff << " (cutoff = length - QL + token + 1); slot " << at.slot
    << " is block " << at.block << " (positions " << first << ".." << first + kBlockTokens - 1 << "), of which "
    << (seen > 0 ? "positions " + std::to_string(first) + ".." + std::to_string(first + seen - 1) + " qualify"
                 : std::string("none qualifies, so the contract writes -inf there"));
  if (at.block < c.table_width) {
    const std::int64_t id = c.table_entry(at.request, at.block);
    o << "; the table names page " << id;
    if (id < 0 || id >= c.pages) o << ", out of range, read as page " << clamp_page(id, c.pages) << " of " << c.pages;
  }
  if (v.report.first->got == c.sentinel && v.report.first->kind != MismatchKind::unwritten_changed)
    o << "; got " << c.sentinel << " is the sentinel out was filled with: the slot, which the contract writes, was never written";
  return o.str();
}

namespace {

Verdict judged(Backend& backend, HostCase& host, const JudgeOptions& options, std::vector<float>* scores) {
  Verdict v;
  v.spec = host.spec;
  v.out = options.out;
  v.backend = backend.name();
  v.oracle = oracle_name(backend.oracle());
  ShardScores expected;
  try {
    expected = oracle_scores(backend.oracle(), host);
  } catch (const ContractError& e) {
    v.fail(Fault::out_of_contract, std::string("the case itself breaks the contract (") + clause_name(e.clause()) + "): " + e.what(),
           {{"clause", clause_name(e.clause())}});
    return v;
  }
  if (options.refusals) {
    try {
      if (const auto r = judge_refusals(backend, host)) v.fail(Fault::refusal, r->str(), r->fields());
    } catch (const BackendHung& e) {
      v.fail(Fault::hung, e.what());
    }
    return v;
  }
  run_into(v, backend, host, expected, options.repeat, scores);
  return v;
}

}  // namespace

std::string replay_flags(const Backend& backend, const JudgeOptions& options) {
  return backend.replay_flags() + out_mode_flags(options.out) +
         (options.repeat > 1 ? " --repeat " + std::to_string(options.repeat) : "") + (options.capture ? " --capture" : "") +
         (options.refusals ? " --refusals" : "");
}

Verdict run_and_judge(Backend& backend, const Case& c, const JudgeOptions& options) {
  HostCase host = laid_out(c);
  Verdict v = judged(backend, host, options, nullptr);
  v.spec = c;
  if (!v.ok() && options.write_failure)
    v.fixture = write_failure_fixture(c, FailureRecord{backend.name(), c.seed, v.out, false, backend.toolchain()}, replay_flags(backend, options));
  return v;
}

Verdict run_and_judge(Backend& backend, HostCase& host, const JudgeOptions& options, std::vector<float>* scores) {
  const HostCase before = host;
  Verdict v = judged(backend, host, options, scores);
  if (!v.ok() && options.write_failure)
    v.fixture = write_failure_fixture(before, FailureRecord{backend.name(), host.spec.seed, v.out, false, backend.toolchain()},
                                      replay_flags(backend, options));
  return v;
}

Verdict run_and_judge(Backend& backend, const Fixture& f, const JudgeOptions& options) {
  Verdict v;
  v.spec = f.spec;
  v.out = options.out;
  v.backend = backend.name();
  v.oracle = "the fixture's expectation";
  HostCase host = f.host();
  if (options.refusals) {
    try {
      if (const auto r = judge_refusals(backend, host)) v.fail(Fault::refusal, r->str(), r->fields());
    } catch (const BackendHung& e) {
      v.fail(Fault::hung, e.what());
    }
  } else if (options.capture) {
    if (options.out != OutMode::given || options.repeat != 1)
      throw std::invalid_argument("a replay is one call with out given: capture takes neither another out mode nor repeats");
    replay_into(v, backend, host, f.oracle());
  } else {
    run_into(v, backend, host, f.oracle(), options.repeat, nullptr);
  }
  return v;
}

void JudgeStats::add(const Verdict& v) {
  ++cases;
  failures += !v.ok();
  if (!v.shape.empty()) ++shapes[v.shape];
  ++out_modes[out_mode_name(v.out)];
  written += v.report.written;
  neg_inf += v.report.written_neg_inf;
  selection_rows += v.report.selection.rows;
  selection_matched += v.report.selection.matched;
  selection_lower_matched += v.report.selection_lower_first.matched;
  near_ties += v.report.selection.near_ties;
  worst_margin = std::min(worst_margin, v.report.selection.worst_margin);
  if (v.report.worst_ratio > worst_ratio) {
    worst_ratio = v.report.worst_ratio;
    worst_case = v.spec.str().substr(0, 160);
  }
}

std::string JudgeStats::str() const {
  std::ostringstream o;
  o.precision(4);
  o << cases << " cases, " << failures << " failing (out:";
  for (const auto& [m, n] : out_modes) o << " " << m << " " << n;
  o << ")";
  if (!shapes.empty()) {
    o << " (by shape:";
    for (const auto& [s, n] : shapes) o << " " << s << " " << n;
    o << ")";
  }
  o << ", " << written << " written elements (" << neg_inf << " -inf), worst error/bound ratio " << worst_ratio;
  o << "; local top-16: " << selection_matched << "/" << selection_rows << " rows matched (lower block first: "
    << selection_lower_matched << "/" << selection_rows << " rows matched), " << near_ties << " near-ties, worst margin ";
  if (worst_margin >= 1e300) o << "none";
  else o << worst_margin;
  if (!worst_case.empty()) o << " in " << worst_case;
  return o.str();
}

}  // namespace ctxscore::harness

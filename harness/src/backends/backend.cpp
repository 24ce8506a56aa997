#include "ctxscore/harness/backend.hpp"
#include "ctxscore/harness/phases.hpp"

#include "ctxscore/harness/case_builder.hpp"
#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/port.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

namespace ctxscore::harness {

std::vector<float> written_scores(const Scored& s, const HostCase& host) {
  const Case& c = host.spec;
  const std::int64_t H = c.heads, T = c.tokens(), L = c.local();
  std::vector<float> dense(static_cast<std::size_t>(H * T * L), std::numeric_limits<float>::quiet_NaN());
  if (s.fresh) {
    if (s.fresh->size() != dense.size())
      throw BackendError("fresh scores of " + std::to_string(s.fresh->size()) + " elements, expected [H, T, L] = " +
                         std::to_string(dense.size()));
    dense = *s.fresh;
  } else {
    if (s.out.size() != host.out.size())
      throw BackendError("an out allocation of " + std::to_string(s.out.size()) + " elements, expected " +
                         std::to_string(host.out.size()));
    const ScoresView o = host.out_layout();
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t row = 0; row < T; ++row)
        for (std::int64_t j = 0; j < L; ++j)
          dense[static_cast<std::size_t>((h * T + row) * L + j)] = s.out[static_cast<std::size_t>(o.offset(h, row, j))];
  }
  for (std::int64_t row = 0; row < T; ++row) {  // what the contract leaves unwritten reads as NaN
    const std::int64_t scan = scan_slots(c.seq_lens[static_cast<std::size_t>(row / c.query_len)], c.global(), L, c.rank, c.world);
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t j = scan; j < L; ++j)
        dense[static_cast<std::size_t>((h * T + row) * L + j)] = std::numeric_limits<float>::quiet_NaN();
  }
  return dense;
}


const char* out_mode_name(OutMode m) {
  switch (m) {
    case OutMode::given: return "given";
    case OutMode::absent: return "absent";
    case OutMode::too_small: return "too_small";
  }
  return "?";
}

OutMode out_mode_named(const std::string& name) {
  for (OutMode m : {OutMode::given, OutMode::absent, OutMode::too_small})
    if (name == out_mode_name(m)) return m;
  throw std::invalid_argument("out mode \"" + name + "\", expected given, absent or too_small");
}

TensorRef too_small(const TensorRef& given, std::int64_t local_slots) {
  TensorRef t = given;
  t.shape[2] = local_slots - 1;
  return t;
}

const char* oracle_name(Oracle o) { return o == Oracle::reference ? "reference" : "plain-loop scorer"; }

ShardScores oracle_scores(Oracle o, HostCase& host) {
  const PhaseClock clock(Phase::reference);
  ScoreArgs args = host.args();
  args.out.reset();
  return o == Oracle::reference ? score_shard(args) : score_shard_naive(args);
}

std::unique_ptr<CapturedScore> Backend::capture(HostCase&, std::int64_t) { return nullptr; }

namespace {

// Why `b` cannot record a graph here (a one-token probe returned none);
// empty when it can. A probe that raises throws BackendError naming it
// (BackendHung where it hung).
std::string capture_absence(Backend& b) {
  const Case probe = CaseBuilder("capture_probe").lens({1}).build();
  HostCase host = laid_out(probe);
  try {
    if (b.capture(host, 128)) return "";
  } catch (const BackendHung& e) {
    throw BackendHung(std::string("capture hung: ") + e.what() + " (on a one-token probe)");
  } catch (const std::exception& e) {
    throw BackendError(std::string("capture raised: ") + e.what() + " (on a one-token probe)");
  }
  return b.name() + " cannot record a graph (" + b.toolchain() + ")";
}

}  // namespace

const Capabilities& Backend::capabilities() {
  if (!capabilities_) capabilities_ = state_capabilities();
  return *capabilities_;
}

Capabilities Backend::state_capabilities() {
  Capabilities c;
  try {
    c.capture = capture_absence(*this);
  } catch (const BackendError&) {
    c.capture.clear();  // the capture check runs and reports the raising probe as its failure
    c.capture_raised = std::current_exception();
  }
  c.geometry = "the backend does not answer `geometry` (a Python port does with --geometry module:function)";
  return c;
}

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Bytes read and written per second by one large host copy.
double host_copy_rate() {
  std::vector<char> a(std::size_t{256} << 20, 1), b(a.size());
  std::vector<double> s;
  for (int k = 0; k < 5; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), a.size());
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    a[static_cast<std::size_t>(k)] = b[static_cast<std::size_t>(k) + 1];  // keeps the copies
  }
  return 2.0 * static_cast<double>(a.size()) / median_of(s) * 1e-9;
}

}  // namespace

Timing Backend::time(HostCase& host, int calls) {
  const std::vector<float> before = host.out;
  score(host, OutMode::given);  // warm-up
  std::vector<double> us;
  for (int k = 0; k < calls; ++k) {
    host.out = before;
    const auto t0 = std::chrono::steady_clock::now();
    score(host, OutMode::given);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  static const double copy_rate = host_copy_rate();  // the machine's, measured once per process
  return {median_of(us), calls, "host wall clock around each call", copy_rate};
}

std::string host_toolchain() {
#if defined(__clang__)
  return std::string("host code built by clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("host code built by g++ ") + __VERSION__;
#else
  return "host code built by an unnamed C++ compiler";
#endif
}

namespace {

// score_shard on the host; a call without a fitting out scores into a fresh
// buffer, as the operator does outside graph capture.
class ReferenceBackend : public Backend {
 public:
  std::string name() const override { return "reference"; }
  Oracle oracle() const override { return Oracle::plain_loop; }
  std::string toolchain() const override { return "the reference, " + host_toolchain(); }
  gen::CaseLimits fuzz_limits() const override { return {}; }
  CallOutcome call(RawCall& call) override {
    CallOutcome o;
    try {
      const ScoreArgs args = call.args();
      const OutDecision d = decide_out(args, validate(args), false);
      if (d.use_given) {
        score_shard(args);
      } else {
        ScoreArgs fresh = args;
        fresh.out.reset();
        score_shard(fresh);
        o.fresh = true;
      }
    } catch (const ContractError& e) {
      o.refused = true;
      o.reason = e.what();
      o.clause = e.clause();
    }
    return o;
  }
  Scored score(HostCase& host, OutMode mode) override {
    const PhaseClock clock(Phase::implementation);
    ScoreArgs args = host.args();
    Scored s;
    if (mode == OutMode::given) {
      score_shard(args);
      s.out = host.out;
      return s;
    }
    if (mode == OutMode::absent) args.out.reset();
    if (mode == OutMode::too_small) args.out = too_small(*args.out, host.spec.local());
    const Layout layout = validate(args);
    const OutDecision d = decide_out(args, layout, false);
    if (d.use_given) throw BackendError("reference: the too-small out fits, the harness built it wrong");
    args.out.reset();
    const ShardScores r = score_shard(args);
    std::vector<float> fresh(r.exact.size(), std::numeric_limits<float>::quiet_NaN());
    for (std::int64_t h = 0; h < r.heads; ++h)
      for (std::int64_t t = 0; t < r.tokens; ++t)
        for (std::int64_t j = 0; j < r.slots; ++j)
          if (r.is_written(t, j)) {
            const std::size_t e = static_cast<std::size_t>(r.index(h, t, j));
            fresh[e] = stored_value(r.exact[e]);
          }
    s.fresh = std::move(fresh);
    if (mode == OutMode::too_small) s.out = host.out;
    return s;
  }
};

}  // namespace

#if defined(CTXSCORE_HAVE_HIP_BACKEND)
std::unique_ptr<Backend> make_hip_backend();
std::string hip_backend_unavailable();
#endif

const std::vector<BackendEntry>& backend_registry() {
  static const std::vector<BackendEntry> registry = [] {
    std::vector<BackendEntry> v;
    v.push_back({"reference", "the CPU reference (oracle: the plain-loop scorer)", [] { return std::string(); },
                 [](const std::string&) -> std::unique_ptr<Backend> { return std::make_unique<ReferenceBackend>(); }});
#if defined(CTXSCORE_HAVE_HIP_BACKEND)
    v.push_back({"hip", "the project's HIP kernel, in process (oracle: the reference)", hip_backend_unavailable,
                 [](const std::string&) { return make_hip_backend(); }});
#else
    v.push_back({"hip", "the project's HIP kernel, in process (oracle: the reference)",
                 [] { return std::string("this build has no GPU kernel (configure with CTXSCORE_CUDA=ON or CTXSCORE_HIP=ON)"); },
                 [](const std::string&) -> std::unique_ptr<Backend> { return nullptr; }});
#endif
    v.push_back({"port", "an implementation in another process, from its command line (fixtures/PROTOCOL.md; oracle: the reference)",
                 [] { return std::string(); }, [](const std::string& command) { return make_port_backend(command); },
                 true});
    return v;
  }();
  return registry;
}

std::unique_ptr<Backend> make_backend(const std::string& name, const std::string& argument) {
  for (const BackendEntry& e : backend_registry()) {
    if (e.name != name) continue;
    if (const std::string why = e.unavailable(); !why.empty())
      throw std::invalid_argument("backend " + name + ": not available: " + why);
    if (e.takes_argument && argument.empty())
      throw std::invalid_argument("backend " + name + ": needs a command line (--port CMD)");
    return e.make(argument);
  }
  std::string names;
  for (const BackendEntry& e : backend_registry()) names += (names.empty() ? "" : ", ") + e.name;
  throw std::invalid_argument("backend \"" + name + "\" is not a backend, expected one of: " + names);
}

}  // namespace ctxscore::harness

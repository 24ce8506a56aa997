// `ctxscore`: the launch geometry, the named cases, fixtures (generate,
// check), fuzzing of a backend against its oracle, and `verify`, the job
// ci/verify runs. Every judgement goes through the harness's run_and_judge.
//
// Exit status: 0 passed; 1 a backend failed; 2 bad usage or bad input (a
// malformed fixture too, when no backend failed); 3 interrupted (SIGINT or
// SIGTERM; the report of what was judged is written).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "ctxscore/fixture.hpp"
#include "ctxscore/harness/compile_keys.hpp"
#include "ctxscore/harness/data_dir.hpp"
#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/named_cases.hpp"
#include "ctxscore/harness/port.hpp"
#include "ctxscore/harness/run_control.hpp"
#include "bench.hpp"
#include "report.hpp"

namespace ctxscore::cli {
namespace {

namespace fs = std::filesystem;
using harness::Backend;
using harness::JudgeStats;
using harness::OutMode;
using harness::Verdict;
using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

enum ExitStatus { kPassed = 0, kFailed = 1, kBadInput = 2, kInterrupted = 3 };

// Why a loop stops before its next case: a stop signal or the spent budget; empty to go on.
std::string stop_reason(const harness::TimeBudget& budget, std::int64_t judged) {
  if (const int sig = harness::stop_signal())
    return std::string("interrupted by ") + (sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal") + " after " +
           std::to_string(judged) + " judged";
  if (budget.spent())
    return "time budget of " + std::to_string(static_cast<long long>(budget.seconds())) + " s spent after " +
           std::to_string(judged) + " judged";
  return "";
}

// ---- geometry -------------------------------------------------------------

int geometry_command(std::int64_t batch, std::int64_t bound, std::int64_t world, std::int64_t heads,
                     std::int64_t query_len, bool as_json) {
  const Geometry g = launch_geometry(batch, bound, world, heads, query_len);
  if (as_json) {
    std::cout << json{{"batch", batch}, {"max_seq_len", bound}, {"world", world}, {"heads", heads},
                      {"query_len", query_len}, {"global_blocks", g.global}, {"local_slots", g.local},
                      {"chunk_count", g.chunks}, {"chunk", g.chunk}, {"grid", {g.grid_x, g.grid_y}},
                      {"tile_n", g.tile_n}}
                     .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
    return 0;
  }
  std::printf("blocks (G)         %lld\nlocal slots (L)    %lld\nchunk count        %lld\nCHUNK              %lld\n"
              "grid               %lld x %lld\ntile N             %lld\n",
              static_cast<long long>(g.global), static_cast<long long>(g.local), static_cast<long long>(g.chunks),
              static_cast<long long>(g.chunk), static_cast<long long>(g.grid_x), static_cast<long long>(g.grid_y),
              static_cast<long long>(g.tile_n));
  return 0;
}

// ---- cases ------------------------------------------------------------------

int cases_command(bool as_json) {
  json rows = json::array();
  for (const harness::NamedCase& n : harness::named_cases()) {
    if (as_json)
      rows.push_back({{"name", n.spec.name}, {"family", harness::family_name(n.family)}, {"what", n.what},
                      {"case", n.spec.str()}});
    else
      std::printf("%-36s %-10s %s\n", n.spec.name.c_str(), harness::family_name(n.family), n.what.c_str());
  }
  if (as_json) std::cout << rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}

// ---- fixtures generate ------------------------------------------------------

int generate_command(const std::string& out, const std::string& cls, std::uint64_t seed, std::int64_t count) {
  std::vector<std::pair<std::string, Case>> cases;
  if (cls.empty()) {
    for (const Case& c : harness::corpus_cases()) cases.emplace_back(c.name, c);
  } else {
    const auto& sizes = gen::limit_names();
    if (std::find(sizes.begin(), sizes.end(), cls) != sizes.end()) {
      for (std::int64_t k = 0; k < count; ++k) {
        Case c = gen::sample_case(gen::named_limits(cls), seed + static_cast<std::uint64_t>(k));
        c.name = cls;
        cases.emplace_back(cls + "_seed" + std::to_string(seed + static_cast<std::uint64_t>(k)), c);
      }
    } else {
      try {
        const harness::NamedCase& n = harness::named_case(cls);
        cases.emplace_back(n.spec.name, n.spec);
      } catch (const std::invalid_argument& e) {
        std::string sizes;
        for (const std::string& n : gen::limit_names()) sizes += (sizes.empty() ? "" : ", ") + n;
        throw CLI::ValidationError("--class", std::string(e.what()) + "; or a random case size: " + sizes);
      }
    }
  }
  fs::create_directories(out);
  std::uintmax_t bytes = 0;
  for (const auto& [name, c] : cases) {
    const fs::path path = fs::path(out) / (name + ".safetensors");
    write_fixture(path.string(), make_fixture(c));
    bytes += fs::file_size(path);
    std::cout << path.string() << "\n";
  }
  std::cout << cases.size() << " fixtures, " << bytes << " bytes in " << out << "\n";
  return 0;
}

// ---- fixtures check ---------------------------------------------------------

std::vector<fs::path> fixture_files(const std::vector<std::string>& inputs) {
  std::vector<fs::path> files;
  for (const std::string& in : inputs) {
    if (fs::is_directory(in)) {
      std::vector<fs::path> dir;
      for (const auto& e : fs::directory_iterator(in))
        if (e.path().extension() == ".safetensors") dir.push_back(e.path());
      if (dir.empty()) throw CLI::ValidationError("PATH", in + " holds no .safetensors files");
      std::sort(dir.begin(), dir.end());
      files.insert(files.end(), dir.begin(), dir.end());
    } else if (fs::exists(in)) {
      files.emplace_back(in);
    } else {
      throw CLI::ValidationError("PATH", in + " does not exist");
    }
  }
  return files;
}

// Each fixture in each out mode of `modes`; a fixture that does not read is
// an error of the fixture, told apart from a failing backend.
Suite check_fixtures(const std::vector<fs::path>& files, Backend& b, const std::vector<OutMode>& modes, bool print,
                     const harness::TimeBudget& budget, int repeat = 1, bool capture = false) {
  Suite s;
  s.name = "corpus";
  s.backend = b.name();
  s.toolchain = b.toolchain();
  s.oracle = "the fixtures' expectations";
  const auto t0 = Clock::now();
  harness::Progress progress;
  for (const fs::path& path : files) {
    if (s.stopped = stop_reason(budget, static_cast<std::int64_t>(s.rows.size())); !s.stopped.empty()) break;
    if (progress.due())
      std::fprintf(stderr, "ctxscore: %s corpus: %zu calls judged, %lld failing, %.0f s\n", b.name().c_str(), s.rows.size(),
                   static_cast<long long>(s.stats.failures), since(t0));
    Fixture f;
    try {
      f = read_fixture(path.string());
    } catch (const std::exception& e) {
      s.add_error(path.filename().string(), std::string("malformed fixture: ") + e.what());
      if (print) std::printf("%-8s %s\n", "BAD", harness::printable(e.what()).c_str());
      continue;
    }
    for (OutMode m : modes) {
      harness::JudgeOptions o;
      o.out = m;
      o.repeat = repeat;
      o.capture = capture;
      Verdict v;
      try {
        v = harness::run_and_judge(b, f, o);
      } catch (const harness::Interrupted&) {
        break;  // the next round names the signal
      }
      const std::string name = path.filename().string() + (m == OutMode::given ? "" : std::string(" out=") + harness::out_mode_name(m));
      s.add(name, v, harness::with_replay_line(fs::absolute(path).string(), harness::replay_flags(b, o)));
      if (print)
        std::printf("%-8s %-60s written %7lld  worst ratio %.3g%s%s\n", v.ok() ? "ok" : "FAIL", harness::printable(name).c_str(),
                    static_cast<long long>(v.report.written), v.report.worst_ratio, v.ok() ? "" : "\n         ",
                    v.ok() ? "" : harness::printable(v.str()).c_str());
    }
  }
  if (s.stopped.empty() && harness::stop_signal()) s.stopped = stop_reason(budget, static_cast<std::int64_t>(s.rows.size()));
  s.seconds = since(t0);
  return s;
}

// ---- fuzz -------------------------------------------------------------------

std::vector<OutMode> modes_named(const std::string& name) {
  if (name == "all") return {OutMode::given, OutMode::absent, OutMode::too_small};
  return {harness::out_mode_named(name)};
}

struct FuzzPlan {
  std::int64_t cases = 100;
  std::uint64_t seed = 1;
  std::string out_mode = "mixed";  // given, absent, too_small, or mixed (drawn per case)
  std::string size;                // small, large, m3, or "" for the backend's own
  std::int64_t max_failures = 0;   // 0: no limit
  int shrink_rounds = 50;
  std::int64_t compile_keys = 0;   // 0: unlimited
  std::int64_t shard_index = 0, shard_count = 1;  // case k runs where k % count == index
  int repeat = 1;                  // calls per case, each after the first bitwise the first's
};

// A failing case made small: RapidCheck's shrinks of the generated case
// (those inside the run's compile keys), the first that still fails taken
// each round, until none does, the rounds run out, the budget is spent or a
// stop signal arrives. Returns the smallest failing verdict.
Verdict shrink(Backend& b, rc::Shrinkable<Case> failing, const harness::JudgeOptions& options, Verdict verdict, int rounds,
               const harness::CaseSource& source, const harness::TimeBudget& budget) {
  harness::JudgeOptions o = options;
  o.write_failure = false;
  try {
    for (int round = 0; round < rounds && !budget.spent(); ++round) {
      rc::Seq<rc::Shrinkable<Case>> candidates = failing.shrinks();
      bool smaller = false;
      while (rc::Maybe<rc::Shrinkable<Case>> next = candidates.next()) {
        if (!source.admits(next->value())) continue;
        const Verdict v = harness::run_and_judge(b, next->value(), o);
        if (v.ok()) continue;
        failing = *next;
        verdict = v;
        smaller = true;
        break;
      }
      if (!smaller) break;
    }
  } catch (const harness::Interrupted&) {
    // keep the smallest failure found so far; the run loop names the signal
  }
  return verdict;
}

// A named size (case_limits.hpp: the same cases as `fixtures generate
// --class` of that name draws); "": the backend's own, forced chunkings
// included where it takes them.
gen::CaseLimits fuzz_limits(Backend& b, const std::string& size) {
  return size.empty() ? b.fuzz_limits() : gen::named_limits(size);
}

Suite fuzz(Backend& b, const FuzzPlan& plan, bool print, const harness::TimeBudget& budget) {
  Suite s;
  s.name = "fuzz";
  s.backend = b.name();
  s.toolchain = b.toolchain();
  s.oracle = harness::oracle_name(b.oracle());
  const bool tty = print && isatty(fileno(stderr));
  harness::Progress progress;
  const harness::CaseSource source(fuzz_limits(b, plan.size), plan.seed, plan.compile_keys);
  if (source.limited()) {
    std::fprintf(stderr, "ctxscore: %zu compile keys drawn from seed %llu:\n", source.keys().size(),
                 static_cast<unsigned long long>(plan.seed));
    for (const harness::CompileKey& k : source.keys()) std::fprintf(stderr, "  %s\n", k.str().c_str());
  }
  const std::int64_t mine = (plan.cases - plan.shard_index + plan.shard_count - 1) / plan.shard_count;
  const auto t0 = Clock::now();
  for (std::int64_t k = plan.shard_index; k < plan.cases; k += plan.shard_count) {
    if (s.stopped = stop_reason(budget, s.stats.cases); !s.stopped.empty()) break;
    const std::uint64_t case_seed = plan.seed + static_cast<std::uint64_t>(k);
    const rc::Shrinkable<Case> drawn = source.draw(case_seed);
    harness::JudgeOptions o;
    o.out = plan.out_mode == "mixed" ? gen::sample_out_mode(case_seed) : harness::out_mode_named(plan.out_mode);
    o.write_failure = false;
    o.repeat = plan.repeat;
    Verdict v;
    try {
      v = harness::run_and_judge(b, drawn.value(), o);
    } catch (const harness::Interrupted&) {
      continue;  // not judged; the next round names the signal
    }
    if (!v.ok()) {
      // The shrunk case is what is written and reported; the drawn one is the seed's.
      v = shrink(b, drawn, o, v, plan.shrink_rounds, source, budget);
      v.fixture = harness::write_failure_fixture(v.spec, harness::FailureRecord{b.name(), case_seed, o.out, true, b.toolchain()},
                                                 harness::replay_flags(b, o));
    }
    s.add("seed " + std::to_string(case_seed), v, v.fixture);
    if (!v.ok() && print) {
      std::string again;
      if (!source.limited())  // a keyed run's case depends on the run's seed and keys as well
        again = "  drawn case again: ctxscore fuzz " + b.replay_flags() + " --cases 1 --seed " + std::to_string(case_seed) +
                " --out-mode " + harness::out_mode_name(o.out) + (plan.size.empty() ? "" : " --case-size " + plan.size) +
                (plan.repeat > 1 ? " --repeat " + std::to_string(plan.repeat) : "") + "\n";
      std::fprintf(stderr, "%sFAIL case %lld, seed %llu\n  shrunk: %s\n  %s\n  fixture: %s\n%s", tty ? "\r" : "",
                   static_cast<long long>(k), static_cast<unsigned long long>(case_seed), harness::printable(v.spec.str()).c_str(),
                   harness::printable(v.str()).c_str(), v.fixture.c_str(), again.c_str());
    }
    if (tty && (s.stats.cases % 16 == 0 || k + plan.shard_count >= plan.cases))
      std::fprintf(stderr, "\r[%lld/%lld] %s vs %s: %lld failures, worst ratio %.3g", static_cast<long long>(s.stats.cases),
                   static_cast<long long>(mine), b.name().c_str(), harness::oracle_name(b.oracle()),
                   static_cast<long long>(s.stats.failures), s.stats.worst_ratio);
    else if (progress.due())  // on stderr with --json too: a CI log shows the run is alive
      std::fprintf(stderr, "ctxscore: fuzz %s: %lld of %lld cases, %lld failing, %.0f s\n", b.name().c_str(),
                   static_cast<long long>(s.stats.cases), static_cast<long long>(mine),
                   static_cast<long long>(s.stats.failures), since(t0));
    if (plan.max_failures > 0 && s.stats.failures >= plan.max_failures) break;
  }
  if (s.stopped.empty() && harness::stop_signal()) s.stopped = stop_reason(budget, s.stats.cases);
  if (tty) std::fprintf(stderr, "\n");
  s.seconds = since(t0);
  return s;
}

// ---- a port's launch geometry -------------------------------------------------

// A port that answers `geometry` against §6's formula: every point of a
// small range (batch 1..48, G 1..96 blocks, world 1..5, H·QL 1..20), then
// random points up to 2^20 requests and blocks.
Suite fuzz_port_geometry(Backend& b, std::int64_t random_points, std::uint64_t seed) {
  Suite s;
  s.name = "geometry";
  s.backend = b.name();
  s.toolchain = b.toolchain();
  s.oracle = "CONTRACT.md section 6";
  harness::PortBackendApi* port = harness::as_port(b);
  const auto t0 = Clock::now();
  const auto judge_point = [&](std::int64_t batch, std::int64_t bound, std::int64_t world, std::int64_t heads,
                               std::int64_t ql) {
    const Geometry want = launch_geometry(batch, bound, world, heads, ql);
    std::string row = "B=" + std::to_string(batch) + " S=" + std::to_string(bound) + " world=" + std::to_string(world) +
                      " H=" + std::to_string(heads) + " QL=" + std::to_string(ql);
    harness::Verdict v;
    v.backend = b.name();
    v.oracle = s.oracle;
    try {
      const harness::PortGeometry got = port->geometry(batch, bound, world, heads, ql);
      if (got.chunk_count != want.chunks || got.chunk != want.chunk || got.grid_x != want.grid_x || got.grid_y != want.grid_y)
        v.error = "launches chunk count " + std::to_string(got.chunk_count) + ", CHUNK " + std::to_string(got.chunk) +
                  ", grid " + std::to_string(got.grid_x) + "x" + std::to_string(got.grid_y) + "; the contract gives " +
                  std::to_string(want.chunks) + ", " + std::to_string(want.chunk) + ", " + std::to_string(want.grid_x) +
                  "x" + std::to_string(want.grid_y);
    } catch (const std::exception& e) {
      v.error = e.what();
    }
    s.add(row, v, "");
    return v.ok();
  };
  int shown = 0;
  for (std::int64_t batch = 1; batch <= 48; ++batch)
    for (std::int64_t g = 1; g <= 96; g += (g < 16 ? 1 : 5))
      for (std::int64_t world = 1; world <= 5; ++world)
        if (!judge_point(batch, g * 128 - (batch % 3 == 0 ? 5 : 0), world, 1 + batch % 5, 1 + g % 4) && shown++ < 3)
          std::fprintf(stderr, "geometry: %s\n", s.rows.back().message.c_str());
  std::mt19937_64 rng(seed);
  for (std::int64_t k = 0; k < random_points; ++k) {
    const std::int64_t batch = 1 + static_cast<std::int64_t>(rng() % (1u << 20));
    const std::int64_t bound = 1 + static_cast<std::int64_t>(rng() % (std::uint64_t{1} << 27));
    const std::int64_t world = 1 + static_cast<std::int64_t>(rng() % 16);
    if (!judge_point(batch, bound, world, 1 + static_cast<std::int64_t>(rng() % 16), 1 + static_cast<std::int64_t>(rng() % 8)) &&
        shown++ < 3)
      std::fprintf(stderr, "geometry: %s\n", s.rows.back().message.c_str());
  }
  s.seconds = since(t0);
  return s;
}

// ---- verify -----------------------------------------------------------------

// The corpus a command uses when none is named: the one installed beside the binary.
std::string default_corpus() {
  try {
    return harness::installed_corpus().string();
  } catch (const std::exception& e) {
    throw CLI::ValidationError("PATH", std::string(e.what()) + "; name a fixture folder");
  }
}

struct VerifyPlan {
  std::string corpus;
  std::int64_t reference_cases = 2000, hip_cases = 3000, port_cases = 1000;
  std::string port, case_size;
  std::uint64_t seed = 1;
  std::int64_t compile_keys = 0;
  std::vector<std::string> required;  // backends whose absence fails the run
};

int verify_command(const VerifyPlan& plan, Report& report, bool print, const harness::TimeBudget& budget) {
  const std::string corpus = plan.corpus.empty() ? default_corpus() : plan.corpus;
  const std::vector<fs::path> files = fixture_files({corpus});
  if (print)
    std::printf("ctxscore verify: corpus %s (%zu fixtures), fuzz seed %llu\n", corpus.c_str(), files.size(),
                static_cast<unsigned long long>(plan.seed));
  for (const harness::BackendEntry& e : harness::backend_registry()) {
    if (e.takes_argument && plan.port.empty()) continue;
    if (const std::string why = e.unavailable(); !why.empty()) {
      const bool required = std::find(plan.required.begin(), plan.required.end(), e.name) != plan.required.end();
      (required ? report.required_absent : report.absent).push_back(e.name + ": " + why);
      continue;
    }
    const std::unique_ptr<Backend> b = e.make(plan.port);
    FuzzPlan fp;
    fp.cases = e.name == "hip" ? plan.hip_cases : e.name == "port" ? plan.port_cases : plan.reference_cases;
    fp.seed = plan.seed;
    fp.size = plan.case_size;
    fp.compile_keys = plan.compile_keys;
    report.suites.push_back(check_fixtures(files, *b, modes_named("all"), false, budget));
    report.suites.push_back(fuzz(*b, fp, print, budget));
    if (harness::PortBackendApi* p = harness::as_port(*b); p && p->supports("geometry") && !harness::stop_signal())
      report.suites.push_back(fuzz_port_geometry(*b, 2000, plan.seed));
  }
  return report.ok() ? kPassed : kFailed;
}

// A positive, finite number of seconds (CLI11's PositiveNumber lets NaN through).
const CLI::Validator kPositiveSeconds(
    [](std::string& text) -> std::string {
      return harness::positive_seconds(text) ? "" : "\"" + harness::printable(text) + "\", expected a positive, finite number of seconds";
    },
    "SECONDS");

// A percentage for a gate: finite and in [0, 10^6] (a range check alone
// lets "nan" through, and a NaN bound passes every comparison).
const CLI::Validator kGatePercent(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0 || v > 1e6)
        return "\"" + harness::printable(text) + "\", expected a finite percentage from 0 to 1000000";
      return "";
    },
    "PCT");

// A seed: a decimal integer in [0, 2^64) (an unsigned parse would wrap "-1").
const CLI::Validator kSeed(
    [](std::string& text) -> std::string {
      std::uint64_t v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size())
        return "\"" + harness::printable(text) + "\", expected a decimal integer from 0 to 18446744073709551615";
      return "";
    },
    "SEED");

// "K/N" with 1 <= K <= N: this run takes the cases k with k % N == K - 1.
std::pair<std::int64_t, std::int64_t> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  try {
    if (slash != std::string::npos) {
      std::size_t used_k = 0, used_n = 0;
      const std::string ks = text.substr(0, slash), ns = text.substr(slash + 1);
      const long long k = std::stoll(ks, &used_k), n = std::stoll(ns, &used_n);
      if (used_k == ks.size() && used_n == ns.size() && n >= 1 && k >= 1 && k <= n) return {k - 1, n};
    }
  } catch (const std::exception&) {
  }
  throw CLI::ValidationError("--shard", "\"" + text + "\", expected K/N with 1 <= K <= N (for example 2/4)");
}

// ---- bench ------------------------------------------------------------------

struct BenchPlan {
  std::vector<std::string> backends, ports, cases;
  int calls = 100;
  std::string baseline;
  double max_slowdown = -1;  // percent; < 0: not given
};

int bench_command(const BenchPlan& plan, bool as_json) {
  if (plan.max_slowdown >= 0 && plan.baseline.empty())
    throw CLI::ValidationError("--max-slowdown", "needs --baseline FILE, the report to compare with");
  if (!plan.baseline.empty() && plan.max_slowdown < 0)
    throw CLI::ValidationError("--baseline", "needs --max-slowdown PCT, how much slower a case may be");
  nlohmann::json baseline;
  if (!plan.baseline.empty()) {
    std::ifstream f(plan.baseline);
    if (!f) throw CLI::ValidationError("--baseline", plan.baseline + ": cannot be read");
    baseline = nlohmann::json::parse(f, nullptr, false);
    if (baseline.is_discarded()) throw CLI::ValidationError("--baseline", plan.baseline + ": not JSON");
  }
  std::vector<Case> cases;
  if (plan.cases.empty()) {
    for (const harness::NamedCase& n : harness::named_cases())
      if (n.family == harness::CaseFamily::benchmark) cases.push_back(n.spec);
  } else {
    for (const std::string& name : plan.cases) cases.push_back(harness::named_case(name).spec);
  }
  std::vector<BenchBackend> backends;
  for (const std::string& name : plan.backends) {
    if (name == "port") throw CLI::ValidationError("--backend", "port: name a port with --port COMMAND");
    backends.push_back({name, harness::make_backend(name)});
  }
  for (const std::string& command : plan.ports) {
    auto b = harness::make_backend("port", command);
    backends.push_back({"port:" + harness::as_port(*b)->port_name(), std::move(b)});
  }
  if (backends.empty()) backends.push_back({"reference", harness::make_backend("reference")});
  BenchReport report = bench(backends, cases, plan.calls);
  if (!plan.baseline.empty()) {
    try {
      compare_with_baseline(report, baseline, plan.max_slowdown);
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("--baseline", plan.baseline + ": " + e.what());
    }
  }
  if (as_json) std::cout << report.json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else std::cout << report.table();
  return report.slower.empty() ? kPassed : kFailed;
}

}  // namespace
}  // namespace ctxscore::cli

int main(int argc, char** argv) {
  using namespace ctxscore::cli;
  namespace harness = ctxscore::harness;
  CLI::App app{"ctxscore: launch geometry, named cases, fixtures, fuzzing and verification of the context-parallel block scoring"};
  app.require_subcommand(1);
  app.footer("Exit status: 0 passed, 1 a backend failed, 2 bad usage or bad input, 3 interrupted (SIGINT/SIGTERM).");
  app.set_version_flag("--version", [] {
    std::string corpus;
    try {
      corpus = harness::installed_corpus().string();
    } catch (const std::exception& e) {
      corpus = std::string("none (") + e.what() + ")";
    }
    return std::string("ctxscore " CTXSCORE_VERSION "\ncorpus: ") + corpus;
  });

  std::int64_t batch = 0, bound = 0, world = 1, heads = 4, query_len = 1;
  bool as_json = false;
  std::string junit;
  auto* geo = app.add_subcommand("geometry", "The contract's production launch geometry for one call");
  geo->add_option("--batch", batch, "requests B")->required()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 31));
  geo->add_option("--max-seq-len", bound, "the capture-stable bound S")->required()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  geo->add_option("--world", world, "context-parallel world size")->required()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  geo->add_option("--heads", heads, "index heads H")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  geo->add_option("--query-len", query_len, "query tokens per request QL")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  geo->add_flag("--json", as_json, "print JSON");

  auto* cases_cmd = app.add_subcommand("cases", "The named cases: upstream tests, corpus edge classes, benchmark shapes");
  cases_cmd->add_flag("--json", as_json, "print JSON (each case's one-line spec included)");

  std::string backend = "reference", port, check_mode = "given", fuzz_mode = "mixed", failures;
  int repeat = 1;
  std::vector<CLI::Option*> port_options;
  const auto add_backend = [&](CLI::App* cmd, std::string& out_mode, const char* modes) {
    cmd->add_option("--backend", backend, "reference, hip or port")->capture_default_str();
    port_options.push_back(cmd->add_option("--port", port, "a port's command line (implies --backend port)"));
    cmd->add_option("--out-mode", out_mode, std::string("how out is passed: ") + modes)->capture_default_str();
    cmd->add_flag("--json", as_json, "print JSON");
    cmd->add_option("--junit", junit, "also write a JUnit XML report here");
    cmd->add_option("--repeat", repeat, "make each call this many times: every call after the first must give its bits")
        ->capture_default_str()->check(CLI::Range(1, 1000));
  };

  auto* fixtures = app.add_subcommand("fixtures", "Generate or check .safetensors fixtures (fixtures/FORMAT.md)");
  fixtures->require_subcommand(1);
  std::string out_dir, cls;
  std::uint64_t seed = 1;
  std::int64_t count = 1;
  auto* gen_cmd = fixtures->add_subcommand("generate", "Write fixtures: the corpus by default, a named case, or --count cases of a random class");
  gen_cmd->add_option("--out", out_dir, "directory to write into")->required();
  gen_cmd->add_option("--class", cls, "a named case (ctxscore cases), or a random case size: small, large, m3");
  gen_cmd->add_option("--seed", seed, "first generator seed of a random class")->capture_default_str()->check(kSeed);
  gen_cmd->add_option("--count", count, "cases of a random class")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  std::vector<std::string> paths;
  auto* check_cmd = fixtures->add_subcommand("check", "Run a backend on fixtures and judge it; non-zero exit on any failure");
  check_cmd->add_option("PATH", paths, "fixture files or directories (default: the corpus installed with this binary)");
  add_backend(check_cmd, check_mode, "given, absent, too_small or all");
  bool capture = false;
  check_cmd->add_flag("--capture", capture,
                      "score each fixture through a graph recorded on a dummy batch of its shapes at its bound, "
                      "then replayed with the fixture's contents (out given)");

  FuzzPlan fuzz_plan;
  std::string shard = "1/1";
  double time_budget = 0;
  auto* fuzz_cmd = app.add_subcommand("fuzz", "Random cases against the backend's oracle; failing cases become fixtures");
  add_backend(fuzz_cmd, fuzz_mode, "given, absent, too_small, or mixed (drawn per case: given in 3 of 5)");
  fuzz_cmd->add_option("--cases", fuzz_plan.cases, "how many cases")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  fuzz_cmd->add_option("--seed", fuzz_plan.seed, "case k uses seed + k")->capture_default_str()->check(kSeed);
  fuzz_cmd->add_option("--max-failures", fuzz_plan.max_failures, "stop after this many failing cases (0: run them all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  fuzz_cmd->add_option("--case-size", fuzz_plan.size, "small (the CPU suite's sizes, for slow ports), large (the GPU suite's) or m3 (M3's shapes at the GPU suite's sizes); default: the backend's")
      ->check(CLI::IsMember(ctxscore::gen::limit_names()));
  fuzz_cmd->add_option("--compile-keys", fuzz_plan.compile_keys,
                       "draw every case from at most this many compile keys (H, QL, world, rank, CHUNK, N, sm_scale), so a "
                       "kernel that specializes on them compiles a few times, not once per case; 0: unlimited")
      ->capture_default_str()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20));
  fuzz_cmd->add_option("--shard", shard, "K/N: run only the cases k with k % N == K-1, so N jobs split one campaign")->capture_default_str();

  VerifyPlan plan;
  auto* verify_cmd = app.add_subcommand("verify", "Every backend present over the corpus (every out mode) plus a fuzz budget; a summary table");
  verify_cmd->add_option("--corpus", plan.corpus, "fixture directory (default: the corpus installed with this binary)");
  verify_cmd->add_option("--reference-cases", plan.reference_cases, "fuzz cases for the reference")->capture_default_str()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  verify_cmd->add_option("--hip-cases", plan.hip_cases, "fuzz cases for the kernel")->capture_default_str()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  port_options.push_back(verify_cmd->add_option("--port", plan.port, "also verify a port (its command line)"));
  verify_cmd->add_option("--case-size", plan.case_size, "small, large or m3 (as for fuzz)")->check(CLI::IsMember(ctxscore::gen::limit_names()));
  verify_cmd->add_option("--port-cases", plan.port_cases, "fuzz cases for the port")->capture_default_str()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  verify_cmd->add_option("--seed", plan.seed, "fuzz seed")->capture_default_str()->check(kSeed);
  verify_cmd->add_option("--compile-keys", plan.compile_keys, "as for fuzz")->capture_default_str()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20));
  verify_cmd->add_option("--require", plan.required, "a backend that must run here: its absence fails verify (repeatable; CTXSCORE_REQUIRE_GPU=1 requires hip)")
      ->check(CLI::IsMember({"reference", "hip", "port"}));
  verify_cmd->add_flag("--json", as_json, "print JSON");
  verify_cmd->add_option("--junit", junit, "also write a JUnit XML report here");

  double port_timeout = 0, port_startup_timeout = 0;
  for (CLI::App* cmd : {check_cmd, fuzz_cmd, verify_cmd}) {
    cmd->add_option("--port-timeout", port_timeout, "seconds a port may take per request (default $CTXSCORE_PORT_TIMEOUT, else 60)")
        ->check(kPositiveSeconds);
    cmd->add_option("--port-startup-timeout", port_startup_timeout,
                    "seconds a port may take to start and answer hello (default $CTXSCORE_PORT_STARTUP_TIMEOUT, else 120)")
        ->check(kPositiveSeconds);
    cmd->add_option("--failures", failures, "where failing cases are written (default $CTXSCORE_FAILURE_DIR, else ./ctxscore-failures)");
  }
  for (CLI::App* cmd : {check_cmd, fuzz_cmd, verify_cmd})
    cmd->add_option("--time-budget", time_budget,
                    "seconds: no new case or fixture starts once they are spent; the report says how many ran (default: none)")
        ->check(kPositiveSeconds);

  BenchPlan bench_plan;
  auto* bench_cmd = app.add_subcommand("bench", "Time backends side by side on the benchmark shapes (or named cases), each "
                                                  "as it measures itself; gate against an earlier report");
  bench_cmd->add_option("--backend", bench_plan.backends, "an in-process backend to time (reference, hip); repeatable");
  bench_cmd->add_option("--port", bench_plan.ports, "a port to time (its command line); repeatable. The first backend "
                                                    "named (--backend before --port) is what the others are compared with");
  bench_cmd->add_option("--case", bench_plan.cases, "a named case (ctxscore cases); repeatable (default: every benchmark shape)");
  bench_cmd->add_option("--calls", bench_plan.calls, "timed calls per backend and case")->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  bench_cmd->add_option("--baseline", bench_plan.baseline, "an earlier `ctxscore bench --json` report to compare with");
  bench_cmd->add_option("--max-slowdown", bench_plan.max_slowdown,
                        "percent a (case, backend) may be slower than the baseline; more fails the run")
      ->check(kGatePercent);
  bench_cmd->add_flag("--json", as_json, "print JSON");

  try {
    app.parse(argc, argv);
  } catch (const CLI::Error& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kPassed : kBadInput;  // --help and --version exit 0; every parse error is bad usage
  }
  try {
    harness::apply_ctest_gpu_assignment();
    harness::port_timeout_seconds();  // a malformed setting is bad input, named before anything runs
    harness::port_startup_timeout_seconds();
    if (!junit.empty() && fs::is_directory(junit))
      throw CLI::ValidationError("--junit", junit + " is a directory; expected the path of the XML file to write");
    for (const CLI::Option* o : port_options)
      if (o->count() > 0 && (o->as<std::string>().find_first_not_of(" \t") == std::string::npos))
        throw CLI::ValidationError(o->get_name(), "an empty command line (an unset variable?); expected the port's command, "
                                                  "for example \"python3 -m ctxscore.port module:function\"");
    if (port_timeout > 0) harness::set_port_timeout_seconds(port_timeout);
    if (port_startup_timeout > 0) harness::set_port_startup_timeout_seconds(port_startup_timeout);
    if (!failures.empty()) harness::set_failure_dir(failures);
    if (!port.empty()) backend = "port";
    if (*geo) return geometry_command(batch, bound, world, heads, query_len, as_json);
    if (*cases_cmd) return cases_command(as_json);
    if (*gen_cmd) return generate_command(out_dir, cls, seed, count);
    if (*bench_cmd) {
      for (const std::string& p : bench_plan.ports)
        if (p.find_first_not_of(" \t") == std::string::npos)
          throw CLI::ValidationError("--port", "an empty command line (an unset variable?); expected the port's command");
      return bench_command(bench_plan, as_json);
    }
    std::tie(fuzz_plan.shard_index, fuzz_plan.shard_count) = parse_shard(shard);
    harness::install_stop_signals();
    const harness::TimeBudget budget(time_budget);
    Report report;
    int rc = kPassed;
    if (*check_cmd) {
      if (check_mode == "mixed") throw CLI::ValidationError("--out-mode", "mixed is for fuzz; fixtures take given, absent, too_small or all");
      if (check_mode != "all") harness::out_mode_named(check_mode);
      if (capture && check_mode != "given")
        throw CLI::ValidationError("--capture", "a replay writes into the captured out: it takes --out-mode given, not " + check_mode);
      if (capture && repeat != 1)
        throw CLI::ValidationError("--capture", "a replay is one call: it takes no --repeat, got " + std::to_string(repeat));
      if (paths.empty()) paths.push_back(default_corpus());
      const std::vector<fs::path> files = fixture_files(paths);
      const auto b = harness::make_backend(backend, port);
      report.suites.push_back(check_fixtures(files, *b, modes_named(check_mode), !as_json, budget, repeat, capture));
    } else if (*fuzz_cmd) {
      if (fuzz_mode != "mixed") harness::out_mode_named(fuzz_mode);
      fuzz_plan.out_mode = fuzz_mode;
      fuzz_plan.repeat = repeat;
      const auto b = harness::make_backend(backend, port);
      report.suites.push_back(fuzz(*b, fuzz_plan, !as_json, budget));
      if (harness::PortBackendApi* p = harness::as_port(*b); p && p->supports("geometry") && !harness::stop_signal())
        report.suites.push_back(fuzz_port_geometry(*b, std::max<std::int64_t>(fuzz_plan.cases, 1000), fuzz_plan.seed));
    } else if (*verify_cmd) {
      if (const char* v = std::getenv("CTXSCORE_REQUIRE_GPU"); v && *v && std::string(v) != "0") plan.required.push_back("hip");
      rc = verify_command(plan, report, !as_json, budget);
    }
    report.interrupted_by = harness::stop_signal();
    if (!junit.empty()) write_junit(report, junit);
    if (as_json) std::cout << report.json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else std::cout << report.table();
    std::cout.flush();
    if (report.interrupted_by) return kInterrupted;
    std::int64_t failures = 0, malformed = 0;
    for (const Suite& suite : report.suites) {
      failures += suite.stats.failures;
      malformed += suite.errors;
    }
    if (failures > 0) return kFailed;
    return malformed > 0 ? kBadInput : rc != kPassed || !report.ok() ? kFailed : kPassed;
  } catch (const CLI::Error& e) {
    app.exit(e);
    return kBadInput;
  } catch (const harness::Interrupted&) {
    std::fprintf(stderr, "ctxscore: interrupted before any report\n");
    return kInterrupted;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ctxscore: %s\n", e.what());
    return kBadInput;
  }
}

// `ctxscore`: the launch geometry, the named cases, fixtures (generate,
// check), fuzzing of a backend against its oracle, and `verify`, the job
// ci/verify runs. Every judgement goes through the harness's run_and_judge.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "ctxscore/fixture.hpp"
#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/named_cases.hpp"
#include "ctxscore/harness/port.hpp"
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

// ---- geometry -------------------------------------------------------------

int geometry_command(std::int64_t batch, std::int64_t bound, std::int64_t world, std::int64_t heads,
                     std::int64_t query_len, bool as_json) {
  const Geometry g = launch_geometry(batch, bound, world, heads, query_len);
  if (as_json) {
    std::cout << json{{"batch", batch}, {"max_seq_len", bound}, {"world", world}, {"heads", heads},
                      {"query_len", query_len}, {"global_blocks", g.global}, {"local_slots", g.local},
                      {"chunk_count", g.chunks}, {"chunk", g.chunk}, {"grid", {g.grid_x, g.grid_y}},
                      {"tile_n", g.tile_n}}
                     .dump(2)
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
      rows.push_back({{"name", n.spec.label}, {"family", harness::family_name(n.family)}, {"what", n.what},
                      {"case", n.spec.str()}});
    else
      std::printf("%-36s %-10s %s\n", n.spec.label.c_str(), harness::family_name(n.family), n.what.c_str());
  }
  if (as_json) std::cout << rows.dump(2) << "\n";
  return 0;
}

// ---- fixtures generate ------------------------------------------------------

// Random classes: generator limits by name.
std::vector<std::pair<std::string, gen::CaseLimits>> random_classes() {
  gen::CaseLimits m3 = gen::gpu_case_limits();
  m3.min_heads = m3.max_heads = 4;
  m3.min_world = m3.max_world = 4;
  m3.min_query_len = 1;
  m3.max_query_len = 4;
  return {{"random", gen::CaseLimits{}}, {"gpu", gen::gpu_case_limits()}, {"m3", m3}};
}

int generate_command(const std::string& out, const std::string& cls, std::uint64_t seed, std::int64_t count) {
  std::vector<std::pair<std::string, Case>> cases;
  if (cls.empty()) {
    for (const Case& c : harness::corpus_cases()) cases.emplace_back(c.label, c);
  } else {
    const auto classes = random_classes();
    const auto r = std::find_if(classes.begin(), classes.end(), [&](const auto& k) { return k.first == cls; });
    if (r != classes.end()) {
      for (std::int64_t k = 0; k < count; ++k) {
        Case c = gen::sample_case(r->second, seed + static_cast<std::uint64_t>(k));
        c.label = cls;
        cases.emplace_back(cls + "_seed" + std::to_string(seed + static_cast<std::uint64_t>(k)), c);
      }
    } else {
      try {
        const harness::NamedCase& n = harness::named_case(cls);
        cases.emplace_back(n.spec.label, n.spec);
      } catch (const std::invalid_argument& e) {
        throw CLI::ValidationError("--class", std::string(e.what()) + "; or a random class: random, gpu, m3");
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
Suite check_fixtures(const std::vector<fs::path>& files, Backend& b, const std::vector<OutMode>& modes, bool print) {
  Suite s;
  s.name = "corpus";
  s.backend = b.name();
  s.oracle = "the fixtures' expectations";
  const auto t0 = Clock::now();
  for (const fs::path& path : files) {
    Fixture f;
    try {
      f = read_fixture(path.string());
    } catch (const std::exception& e) {
      s.add_error(path.filename().string(), std::string("malformed fixture: ") + e.what());
      if (print) std::printf("%-8s %s\n", "BAD", e.what());
      continue;
    }
    for (OutMode m : modes) {
      harness::JudgeOptions o;
      o.out = m;
      const Verdict v = harness::run_and_judge(b, f, o);
      const std::string name = path.filename().string() + (m == OutMode::given ? "" : std::string(" out=") + harness::out_mode_name(m));
      s.add(name, v, path.string());
      if (print)
        std::printf("%-8s %-60s written %7lld  worst ratio %.3g%s%s\n", v.ok() ? "ok" : "FAIL", name.c_str(),
                    static_cast<long long>(v.report.written), v.report.worst_ratio, v.ok() ? "" : "\n         ",
                    v.ok() ? "" : v.str().c_str());
    }
  }
  s.seconds = since(t0);
  return s;
}

// ---- fuzz -------------------------------------------------------------------

std::vector<OutMode> modes_named(const std::string& name) {
  if (name == "all") return {OutMode::given, OutMode::absent, OutMode::too_small};
  return {harness::out_mode_named(name)};
}

// Case k of a run: the backend's generator at seed + k, and its out mode
// (drawn from the seed for "mixed": half absent, a quarter each given and too small).
// A failing case made small: RapidCheck's shrinks of the generated case,
// the first that still fails taken each round, until none does (at most
// `rounds` rounds). Returns the smallest failing verdict.
Verdict shrink(Backend& b, rc::Shrinkable<Case> failing, OutMode mode, Verdict verdict, int rounds) {
  harness::JudgeOptions o;
  o.out = mode;
  o.write_failure = false;
  for (int round = 0; round < rounds; ++round) {
    rc::Seq<rc::Shrinkable<Case>> candidates = failing.shrinks();
    bool smaller = false;
    while (rc::Maybe<rc::Shrinkable<Case>> next = candidates.next()) {
      const Verdict v = harness::run_and_judge(b, next->value(), o);
      if (v.ok()) continue;
      failing = *next;
      verdict = v;
      smaller = true;
      break;
    }
    if (!smaller) break;
  }
  return verdict;
}

// "small": the CPU suite's case sizes (for slow ports); "large": the GPU
// suite's; "": the backend's own.
gen::CaseLimits fuzz_limits(Backend& b, const std::string& size) {
  if (size == "small") return gen::CaseLimits{};
  if (size == "m3") {  // M3's shapes: H 4, world 4, decode or speculative decode, the GPU suite's sizes
    gen::CaseLimits lim = gen::gpu_case_limits();
    lim.min_heads = lim.max_heads = 4;
    lim.min_world = lim.max_world = 4;
    lim.min_query_len = 1;
    lim.max_query_len = 4;
    lim.forced_geometry = false;
    return lim;
  }
  if (size == "large") {
    gen::CaseLimits lim = gen::gpu_case_limits();
    lim.forced_geometry = b.fuzz_limits().forced_geometry;
    return lim;
  }
  return b.fuzz_limits();
}

Suite fuzz(Backend& b, std::int64_t cases, std::uint64_t seed, const std::string& out_mode, const std::string& size,
           bool print, std::int64_t max_failures = 0, int shrink_rounds = 50) {
  Suite s;
  s.name = "fuzz";
  s.backend = b.name();
  s.oracle = harness::oracle_name(b.oracle());
  const bool tty = print && isatty(fileno(stderr));
  const gen::CaseLimits lim = fuzz_limits(b, size);
  const auto t0 = Clock::now();
  for (std::int64_t k = 0; k < cases; ++k) {
    const std::uint64_t case_seed = seed + static_cast<std::uint64_t>(k);
    const rc::Shrinkable<Case> drawn = gen::genCase(lim)(rc::Random(case_seed), 100);
    const Case c = drawn.value();
    harness::JudgeOptions o;
    o.out = out_mode == "mixed" ? gen::sample_out_mode(case_seed) : harness::out_mode_named(out_mode);
    o.write_failure = false;
    Verdict v = harness::run_and_judge(b, c, o);
    if (!v.ok()) {
      // The shrunk case is what is written and reported; the drawn one is the seed's.
      v = shrink(b, drawn, o.out, v, shrink_rounds);
      v.fixture = harness::write_failure_fixture(v.spec, b.name() + "_seed" + std::to_string(case_seed) + "_shrunk",
                                                 b.replay_flags() + (o.out == OutMode::given ? "" : std::string(" --out-mode ") +
                                                                                                        harness::out_mode_name(o.out)));
    }
    s.add("seed " + std::to_string(case_seed), v, v.fixture);
    const bool stop = max_failures > 0 && s.stats.failures >= max_failures;
    if (!v.ok() && print)
      std::fprintf(stderr, "%sFAIL case %lld, seed %llu (replay: ctxscore fuzz %s --cases 1 --seed %llu --out-mode %s%s)\n  shrunk: %s\n  %s\n  fixture: %s\n",
                   tty ? "\r" : "", static_cast<long long>(k), static_cast<unsigned long long>(case_seed),
                   b.replay_flags().c_str(), static_cast<unsigned long long>(case_seed), harness::out_mode_name(o.out),
                   size.empty() ? "" : (" --case-size " + size).c_str(),
                   v.spec.str().c_str(), v.str().c_str(), v.fixture.c_str());
    if (tty && (k % 16 == 15 || k + 1 == cases))
      std::fprintf(stderr, "\r[%lld/%lld] %s vs %s: %lld failures, worst ratio %.3g", static_cast<long long>(k + 1),
                   static_cast<long long>(cases), b.name().c_str(), harness::oracle_name(b.oracle()),
                   static_cast<long long>(s.stats.failures), s.stats.worst_ratio);
    if (stop) break;
  }
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

std::string default_corpus() {
  if (fs::is_directory("fixtures/corpus")) return "fixtures/corpus";
  return CTXSCORE_SOURCE_DIR "/fixtures/corpus";
}

struct VerifyPlan {
  std::string corpus;
  std::int64_t reference_cases = 2000, hip_cases = 3000, port_cases = 1000;
  std::string port, case_size;
  std::uint64_t seed = 1;
};

int verify_command(const VerifyPlan& plan, Report& report, bool print) {
  const std::vector<fs::path> files = fixture_files({plan.corpus});
  if (print)
    std::printf("ctxscore verify: corpus %s (%zu fixtures), fuzz seed %llu\n", plan.corpus.c_str(), files.size(),
                static_cast<unsigned long long>(plan.seed));
  for (const harness::BackendEntry& e : harness::backend_registry()) {
    if (e.takes_argument && plan.port.empty()) continue;
    if (const std::string why = e.unavailable(); !why.empty()) {
      report.absent.push_back(e.name + ": " + why);
      continue;
    }
    const std::unique_ptr<Backend> b = e.make(plan.port);
    const std::int64_t n = e.name == "hip" ? plan.hip_cases : e.name == "port" ? plan.port_cases : plan.reference_cases;
    report.suites.push_back(check_fixtures(files, *b, modes_named("all"), false));
    report.suites.push_back(fuzz(*b, n, plan.seed, "mixed", plan.case_size, print));
    if (harness::PortBackendApi* p = harness::as_port(*b); p && p->supports("geometry"))
      report.suites.push_back(fuzz_port_geometry(*b, 2000, plan.seed));
  }
  return report.ok() ? 0 : 1;
}

}  // namespace
}  // namespace ctxscore::cli

int main(int argc, char** argv) {
  using namespace ctxscore::cli;
  namespace harness = ctxscore::harness;
  CLI::App app{"ctxscore: launch geometry, named cases, fixtures, fuzzing and verification of the context-parallel block scoring"};
  app.require_subcommand(1);

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

  std::string backend = "reference", port, out_mode = "given", failures;
  const auto add_backend = [&](CLI::App* cmd, const char* default_mode) {
    out_mode = default_mode;
    cmd->add_option("--backend", backend, "reference, hip or port")->capture_default_str();
    cmd->add_option("--port", port, "a port's command line (implies --backend port)");
    cmd->add_option("--out-mode", out_mode, "how out is passed: given, absent, too_small, all (fixtures) or mixed (fuzz)")
        ->capture_default_str();
    cmd->add_flag("--json", as_json, "print JSON");
    cmd->add_option("--junit", junit, "also write a JUnit XML report here");
  };

  auto* fixtures = app.add_subcommand("fixtures", "Generate or check .safetensors fixtures (fixtures/FORMAT.md)");
  fixtures->require_subcommand(1);
  std::string out_dir, cls;
  std::uint64_t seed = 1;
  std::int64_t count = 1;
  auto* gen_cmd = fixtures->add_subcommand("generate", "Write fixtures: the corpus by default, a named case, or --count cases of a random class");
  gen_cmd->add_option("--out", out_dir, "directory to write into")->required();
  gen_cmd->add_option("--class", cls, "a named case (ctxscore cases), or a random class: random, gpu, m3");
  gen_cmd->add_option("--seed", seed, "first generator seed of a random class")->capture_default_str();
  gen_cmd->add_option("--count", count, "cases of a random class")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  std::vector<std::string> paths;
  auto* check_cmd = fixtures->add_subcommand("check", "Run a backend on fixtures and judge it; non-zero exit on any failure");
  check_cmd->add_option("PATH", paths, "fixture files or directories (default: the committed corpus)");
  add_backend(check_cmd, "given");

  std::int64_t cases = 100, max_failures = 0;
  std::string case_size;
  double port_timeout = 0;
  auto* fuzz_cmd = app.add_subcommand("fuzz", "Random cases against the backend's oracle; failing cases become fixtures");
  add_backend(fuzz_cmd, "mixed");
  fuzz_cmd->add_option("--cases", cases, "how many cases")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  fuzz_cmd->add_option("--seed", seed, "case k uses seed + k")->capture_default_str();
  fuzz_cmd->add_option("--max-failures", max_failures, "stop after this many failing cases (0: run them all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  fuzz_cmd->add_option("--failures", failures, "where failing cases are written (default $CTXSCORE_FAILURE_DIR, else ctxscore-failures)");
  fuzz_cmd->add_option("--case-size", case_size, "small (the CPU suite's sizes, for slow ports), large (the GPU suite's) or m3 (M3's shapes at the GPU suite's sizes); default: the backend's")
      ->check(CLI::IsMember({"small", "large", "m3"}));

  VerifyPlan plan;
  plan.corpus = default_corpus();
  auto* verify_cmd = app.add_subcommand("verify", "Every backend present over the corpus (every out mode) plus a fuzz budget; a summary table");
  verify_cmd->add_option("--corpus", plan.corpus, "fixture directory")->capture_default_str();
  verify_cmd->add_option("--reference-cases", plan.reference_cases, "fuzz cases for the reference")->capture_default_str()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  verify_cmd->add_option("--hip-cases", plan.hip_cases, "fuzz cases for the kernel")->capture_default_str()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  verify_cmd->add_option("--port", plan.port, "also verify a port (its command line)");
  verify_cmd->add_option("--case-size", plan.case_size, "small, large or m3 (as for fuzz)")->check(CLI::IsMember({"small", "large", "m3"}));
  verify_cmd->add_option("--port-cases", plan.port_cases, "fuzz cases for the port")->capture_default_str()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  verify_cmd->add_option("--seed", plan.seed, "fuzz seed")->capture_default_str();
  verify_cmd->add_option("--failures", failures, "where failing cases are written");
  verify_cmd->add_flag("--json", as_json, "print JSON");
  verify_cmd->add_option("--junit", junit, "also write a JUnit XML report here");

  for (CLI::App* cmd : {check_cmd, fuzz_cmd, verify_cmd})
    cmd->add_option("--port-timeout", port_timeout, "seconds a port may take per request (default $CTXSCORE_PORT_TIMEOUT, else 60)")
        ->check(CLI::PositiveNumber);

  CLI11_PARSE(app, argc, argv);
  try {
    if (port_timeout > 0) harness::set_port_timeout_seconds(port_timeout);
    if (!failures.empty()) harness::set_failure_dir(failures);
    if (!port.empty()) backend = "port";
    if (*geo) return geometry_command(batch, bound, world, heads, query_len, as_json);
    if (*cases_cmd) return cases_command(as_json);
    if (*gen_cmd) return generate_command(out_dir, cls, seed, count);
    Report report;
    int rc = 0;
    if (*check_cmd) {
      const auto b = harness::make_backend(backend, port);
      if (out_mode == "mixed") throw CLI::ValidationError("--out-mode", "mixed is for fuzz; fixtures take given, absent, too_small or all");
      if (paths.empty()) paths.push_back(default_corpus());
      report.suites.push_back(check_fixtures(fixture_files(paths), *b, modes_named(out_mode), !as_json));
    } else if (*fuzz_cmd) {
      const auto b = harness::make_backend(backend, port);
      if (out_mode != "mixed") harness::out_mode_named(out_mode);
      report.suites.push_back(fuzz(*b, cases, seed, out_mode, case_size, !as_json, max_failures));
      if (harness::PortBackendApi* p = harness::as_port(*b); p && p->supports("geometry"))
        report.suites.push_back(fuzz_port_geometry(*b, std::max<std::int64_t>(cases, 1000), seed));
    } else if (*verify_cmd) {
      rc = verify_command(plan, report, !as_json);
    }
    if (!junit.empty()) write_junit(report, junit);
    if (as_json) std::cout << report.json().dump(2) << "\n";
    else std::cout << report.table();
    return rc != 0 || !report.ok() ? 1 : 0;
  } catch (const CLI::Error& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ctxscore: %s\n", e.what());
    return 2;
  }
}

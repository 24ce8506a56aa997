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
#include <cctype>
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
#include <thread>

#include "ctxscore/fixture.hpp"
#include "ctxscore/harness/checks.hpp"
#include "ctxscore/harness/compile_keys.hpp"
#include "ctxscore/harness/data_dir.hpp"
#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/named_cases.hpp"
#include "ctxscore/harness/port.hpp"
#include "ctxscore/harness/run_control.hpp"
#include "bench.hpp"

namespace ctxscore::cli {
namespace {

namespace fs = std::filesystem;
using harness::Backend;
using harness::CheckOptions;
using harness::JudgeStats;
using harness::Report;
using harness::Suite;
using harness::OutMode;
using harness::Verdict;
using json = nlohmann::ordered_json;
using harness::kBadInput;
using harness::kFailed;
using harness::kInterrupted;
using harness::kPassed;
using harness::kUnavailable;

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

// ---- guide ------------------------------------------------------------------

int guide_command() {
  const fs::path dir = harness::data_dir();
  std::ifstream readme(dir / "README.md");
  if (!readme) throw std::runtime_error("no guide beside this binary: " + (dir / "README.md").string() + " cannot be read");
  std::cout << readme.rdbuf() << "\n---\nInstalled beside this binary:\n";
  for (const char* name : {"README.md", "CONTRACT.md", "FORMAT.md", "PROTOCOL.md", "native_port.h", "corpus", "recipes"})
    std::cout << "  " << (dir / name).string() << "\n";
  return kPassed;
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

// A seed no earlier run chose: a run explores new cases, and prints the
// seed that draws them again.
std::uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32 | rd()) % 1000000000000ull;
}

// This binary's absolute path: the replay lines it prints run as printed
// whatever PATH holds.
std::string own_path(const char* argv0) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) return self.string();
  return fs::absolute(argv0).string();
}

// ---- fixtures check, fuzz ----------------------------------------------------

std::vector<OutMode> modes_named(const std::string& name) {
  if (name == "all") return {OutMode::given, OutMode::absent, OutMode::too_small};
  return {harness::out_mode_named(name)};
}

std::vector<fs::path> fixture_files(const std::vector<std::string>& inputs) {
  try {
    return harness::fixture_files(inputs);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError("PATH", e.what());
  }
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

// Where a run's words go while it runs (harness::Say).
void to_stderr(const std::string& text) { std::fputs(text.c_str(), stderr); }
void to_stdout(const std::string& text) { std::fputs(text.c_str(), stdout); }

struct VerifyPlan {
  std::string corpus;
  std::int64_t reference_cases = 2000, hip_cases = 3000, port_cases = 1000;
  std::string port, case_size;
  std::uint64_t seed = 1;
  std::int64_t compile_keys = 0;
  std::vector<std::string> required;  // backends whose absence fails the run
  std::int64_t min_cases = -1;        // -1: every case asked
};

void verify_command(const VerifyPlan& plan, Report& report, bool print, const harness::TimeBudget& budget) {
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
    CheckOptions fo;
    fo.campaign.cases = e.name == "hip" ? plan.hip_cases : e.name == "port" ? plan.port_cases : plan.reference_cases;
    fo.campaign.seed = plan.seed;
    fo.campaign.max_failures = 0;
    fo.campaign.min_cases = plan.min_cases;
    if (print) fo.campaign.say = to_stderr;
    fo.campaign.budget = &budget;
    fo.size = plan.case_size;
    fo.compile_keys = plan.compile_keys;
    harness::CheckContext x;
    x.drawn = fo;
    x.corpus = files;
    x.geometry_points = 2000;
    report.suites.push_back(harness::run_check("corpus", *b, x));
    if (fo.campaign.cases > 0) report.suites.push_back(harness::run_check("fuzz", *b, x));
    if (harness::unmet_need(harness::check_named("geometry"), *b).empty() && !harness::stop_signal())
      report.suites.push_back(harness::run_check("geometry", *b, x));
  }
}

// A port's time limit: a finite number of seconds, at least a millisecond
// (a smaller one would time out every request and blame the port).
const CLI::Validator kTimeoutSeconds(
    [](std::string& text) -> std::string {
      const std::optional<double> v = harness::positive_seconds(text);
      return v && *v >= 1e-3 ? "" : "\"" + harness::printable(text) + "\", expected a finite number of seconds, at least 0.001";
    },
    "SECONDS");

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

// A count: decimal digits alone, in [lo, hi] (CLI11's integer parse takes
// " 5" and "0x10", and a range check prints its bound as a double).
CLI::Validator decimal_in(std::int64_t lo, std::int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || text[0] == '-' || ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
          return "\"" + harness::printable(text) + "\", expected a decimal integer from " + std::to_string(lo) + " to " +
                 std::to_string(hi);
        return "";
      },
      "INT");
}

// "K/N" with 1 <= K <= N: this run takes the cases k with k % N == K - 1.
std::pair<std::int64_t, std::int64_t> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  const auto digits = [](const std::string& t) {
    return !t.empty() && std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  try {
    if (slash != std::string::npos && digits(text.substr(0, slash)) && digits(text.substr(slash + 1))) {
      std::size_t used_k = 0, used_n = 0;
      const std::string ks = text.substr(0, slash), ns = text.substr(slash + 1);
      const long long k = std::stoll(ks, &used_k), n = std::stoll(ns, &used_n);
      if (used_k == ks.size() && used_n == ns.size() && n >= 1 && k >= 1 && k <= n) return {k - 1, n};
    }
  } catch (const std::exception&) {
  }
  throw CLI::ValidationError("--shard", "\"" + harness::printable(text) + "\", expected K/N with 1 <= K <= N (for example 2/4)");
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
  app.footer("Exit status: 0 passed, 1 a backend or check failed (a check that judged fewer cases than its floor included), "
             "2 bad usage or bad input, 3 interrupted (SIGINT/SIGTERM), 4 the environment lacks what the backend needs "
             "(a device the port cannot open): nothing was judged.");
  harness::set_replay_program(own_path(argv[0]));
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
  bool timings = false;
  auto* geo = app.add_subcommand("geometry", "The contract's production launch geometry for one call");
  geo->add_option("--batch", batch, "requests B")->required()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 31));
  geo->add_option("--max-seq-len", bound, "the capture-stable bound S")->required()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  geo->add_option("--world", world, "context-parallel world size")->required()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  geo->add_option("--heads", heads, "index heads H")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  geo->add_option("--query-len", query_len, "query tokens per request QL")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  geo->add_flag("--json", as_json, "print JSON");

  auto* guide_cmd = app.add_subcommand("guide", "The kernel author's guide (README.md), then where the contract, the formats "
                                                  "and the native port's C header are installed");

  auto* cases_cmd = app.add_subcommand("cases", "The named cases: upstream tests, corpus edge classes, benchmark shapes");
  cases_cmd->add_flag("--json", as_json, "print JSON (each case's one-line spec included)");

  std::string backend = "reference", port, check_mode = "given", fuzz_mode = "mixed", failures;
  int repeat = 1;
  std::vector<CLI::Option*> port_options, backend_options, junit_options;
  const auto add_backend = [&](CLI::App* cmd, std::string& out_mode, const char* modes) {
    backend_options.push_back(cmd->add_option("--backend", backend, "reference, hip or port")->capture_default_str());
    port_options.push_back(cmd->add_option("--port", port, "a port's command line (implies --backend port)"));
    cmd->add_option("--out-mode", out_mode, std::string("how out is passed: ") + modes)->capture_default_str();
    cmd->add_flag("--json", as_json, "print JSON");
    cmd->add_flag("--timings", timings, "also print where each check's seconds went: setup, reference, the implementation's "
                                        "calls (compiles included), transfer, judge, and the harness's own");
    junit_options.push_back(cmd->add_option("--junit", junit, "also write a JUnit XML report here"));
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
  bool refusals = false;
  check_cmd->add_flag("--refusals", refusals,
                      "hand the backend each fixture's call, then that call with one clause of the contract's "
                      "validation broken at a time: each must be refused with nothing written (out given)");

  CheckOptions drawn;  // fuzz's drawn cases; the gate's are gate_drawn until parsed
  drawn.campaign.cases = 100;
  drawn.campaign.say = to_stderr;
  // The gate's defaults are the pytest gate's: 200 cases from at most 8 compile keys.
  CheckOptions gate_drawn = drawn;
  gate_drawn.campaign.cases = 200;
  gate_drawn.compile_keys = 8;
  std::string shard = "1/1", seed_text, gate_mode = "mixed";
  std::int64_t min_cases = -1;
  double time_budget = 0;
  const auto add_drawn = [&](CLI::App* cmd, CheckOptions& o) {
    cmd->add_option("--cases", o.campaign.cases, "how many cases")->capture_default_str()->check(decimal_in(1, std::int64_t{1} << 40));
    cmd->add_option("--seed", seed_text, "the run's seed: case k is drawn from a hash of (seed, check, k) (default: a fresh one, printed)")->check(kSeed);
    cmd->add_option("--max-failures", o.campaign.max_failures, "stop a check after this many failing cases, each shrunk (0: judge every case)")
        ->capture_default_str()->check(decimal_in(0, std::int64_t{1} << 40));
    cmd->add_option("--min-cases", min_cases, "a check that judged fewer cases than this fails (default: every case asked)")
        ->check(decimal_in(0, std::int64_t{1} << 40));
    cmd->add_option("--case-size", o.size, "small (the CPU suite's sizes, for slow ports), large (the GPU suite's) or m3 (M3's shapes at the GPU suite's sizes); default: the backend's")
        ->check(CLI::IsMember(ctxscore::gen::limit_names()));
    cmd->add_option("--compile-keys", o.compile_keys,
                    "draw every case from at most this many compile keys (H, QL, world, rank, CHUNK, N, sm_scale), so a "
                    "kernel that specializes on them compiles a few times, not once per case; shrinking leaves them; 0: unlimited")
        ->capture_default_str()->check(decimal_in(0, std::int64_t{1} << 20));
    cmd->add_option("--shard", shard, "K/N: run only the cases k with k % N == K-1, so N jobs split one campaign")->capture_default_str();
    cmd->add_option("--only-case", o.campaign.only_case, "judge case K of the run alone (a failure's drawn case again)")
        ->check(decimal_in(0, std::int64_t{1} << 40));
  };
  auto* fuzz_cmd = app.add_subcommand("fuzz", "Random cases against the backend's oracle; failing cases become fixtures");
  add_backend(fuzz_cmd, fuzz_mode, "given, absent, too_small, or mixed (drawn per case: given in 3 of 5)");
  add_drawn(fuzz_cmd, drawn);

  std::vector<std::string> gate_checks, gate_required, gate_corpus;
  std::int64_t geometry_points = 1000;
  bool list_checks = false;
  auto* gate_cmd = app.add_subcommand("gate", "Every check the harness knows against one backend or port: one verdict per check");
  add_backend(gate_cmd, gate_mode, "given, absent, too_small, or mixed (fuzz's; the other checks choose their own)");
  add_drawn(gate_cmd, gate_drawn);
  gate_cmd->add_option("--check", gate_checks, "run this check (repeatable; default: every check, `--list` names them)");
  gate_cmd->add_option("--require", gate_required, "a check that must run here: \"not run\" fails it (repeatable)");
  gate_cmd->add_option("--corpus", gate_corpus, "fixture files or folders for the corpus checks (default: the corpus installed with this binary)");
  gate_cmd->add_option("--geometry-points", geometry_points, "random points of the geometry check")->capture_default_str()
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 30));
  gate_cmd->add_flag("--list", list_checks, "list the checks and what each catches, then exit");
  bool fail_fast = false;
  gate_cmd->add_flag("--fail-fast", fail_fast, "stop at the first failing check: the checks after it report \"not run\"");
  std::int64_t jobs = 0;
  gate_cmd->add_option("--jobs", jobs, "checks run side by side, each of N instances of the backend (a port: N processes) "
                                       "taking the next, reported in order; default 2 for a backend on the host (a port on "
                                       "`cpu`, the reference) where the machine has 2 cores or more, else 1")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{64}));

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
  verify_cmd->add_option("--min-cases", plan.min_cases, "a suite that judged fewer cases than this fails (default: every case asked)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  verify_cmd->add_flag("--json", as_json, "print JSON");
  junit_options.push_back(verify_cmd->add_option("--junit", junit, "also write a JUnit XML report here"));

  double port_timeout = 0, port_startup_timeout = 0;
  for (CLI::App* cmd : {check_cmd, fuzz_cmd, verify_cmd, gate_cmd}) {
    cmd->add_option("--port-timeout", port_timeout, "seconds a port may take per request (default $CTXSCORE_PORT_TIMEOUT, else 60)")
        ->check(kTimeoutSeconds);
    cmd->add_option("--port-startup-timeout", port_startup_timeout,
                    "seconds a port may take to start and answer hello (default $CTXSCORE_PORT_STARTUP_TIMEOUT, else 120)")
        ->check(kTimeoutSeconds);
    cmd->add_option("--failures", failures, "where failing cases are written (default $CTXSCORE_FAILURE_DIR, else ./ctxscore-failures)");
  }
  check_cmd->add_option("--min-cases", min_cases, "fewer calls judged than this fails (default: every fixture in every mode)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  for (CLI::App* cmd : {check_cmd, fuzz_cmd, verify_cmd, gate_cmd})
    cmd->add_option("--time-budget", time_budget,
                    "seconds: no new case or fixture starts once they are spent (the gate shares them among its checks); a check that "
                    "judged fewer cases than --min-cases still fails (default: none)")
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

  std::vector<std::string> merge_files;
  auto* merge_cmd = app.add_subcommand(
      "merge", "The JSON reports (--json) of one campaign's shards as one report: every case, every failure with its "
               "fixture; refuses shards of another seed, check, version, backend, setting or toolchain, and a set with a "
               "shard missing or given twice");
  merge_cmd->add_option("reports", merge_files, "the shards' JSON reports, one file each")->required();
  merge_cmd->add_flag("--json", as_json, "print the merged report as JSON");
  junit_options.push_back(merge_cmd->add_option("--junit", junit, "also write the merged JUnit XML report here"));

  // CLI11 says only "A subcommand is required" of a word it does not know.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      found = found || sub->get_name() == argv[1];
    }
    if (!found) {
      std::fprintf(stderr, "ctxscore: no command \"%s\"; the commands are %s (ctxscore --help)\n", harness::printable(argv[1]).c_str(),
                   known.c_str());
      return kBadInput;
    }
  }
  try {
    app.parse(argc, argv);
    if (*gate_cmd) drawn = gate_drawn;
  } catch (const CLI::Error& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kPassed : kBadInput;  // --help and --version exit 0; every parse error is bad usage
  }
  // Once --junit names a writable path, a run that ends in an error before
  // any report still leaves a JUnit file saying so.
  bool junit_usable = false;
  const auto junit_error = [&](const std::string& testcase, const std::string& message) {
    if (!junit_usable) return;
    try {
      harness::write_junit_error(testcase, message, junit);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ctxscore: %s\n", e.what());
    }
  };
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
    if (!failures.empty() || std::getenv(ctxscore::kFailureDirVariable)) {
      // Found now, not at the first failure: a failing case must have somewhere to go.
      if (const std::string why = harness::failure_dir_problem(); !why.empty())
        throw CLI::ValidationError(failures.empty() ? "CTXSCORE_FAILURE_DIR" : "--failures", why);
    }
    for (const CLI::Option* o : junit_options)
      if (o->count() > 0 && junit.empty())
        throw CLI::ValidationError("--junit", "an empty path (an unset variable?); expected the XML file to write");
    junit_usable = !junit.empty();
    const bool backend_named = std::any_of(backend_options.begin(), backend_options.end(), [](const CLI::Option* o) { return o->count() > 0; });
    if (backend_named && !port.empty() && backend != "port")
      throw CLI::ValidationError("--backend", "--backend " + harness::printable(backend) + " with --port: the run would judge the port, not " +
                                                  harness::printable(backend) + "; give one of them");
    if (*gate_cmd) {
      for (const auto& [option, names] : {std::pair{"--check", &gate_checks}, std::pair{"--require", &gate_required}})
        for (const std::string& n : *names) try {
            harness::check_named(n);
          } catch (const std::invalid_argument& e) {
            throw CLI::ValidationError(option, e.what());
          }
    }
    if (!port.empty()) backend = "port";
    if (*geo) return geometry_command(batch, bound, world, heads, query_len, as_json);
    if (*cases_cmd) return cases_command(as_json);
    if (*guide_cmd) return guide_command();
    if (*gen_cmd) return generate_command(out_dir, cls, seed, count);
    if (*bench_cmd) {
      for (const std::string& p : bench_plan.ports)
        if (p.find_first_not_of(" \t") == std::string::npos)
          throw CLI::ValidationError("--port", "an empty command line (an unset variable?); expected the port's command");
      return bench_command(bench_plan, as_json);
    }
    if (*gate_cmd && list_checks) {
      nlohmann::ordered_json listed = nlohmann::ordered_json::array();
      for (const harness::CheckDef& d : harness::check_registry()) {
        nlohmann::ordered_json needs = nlohmann::ordered_json::array();
        for (const harness::Need n : d.needs)
          needs.push_back(n == harness::Need::capture ? "capture" : n == harness::Need::refusals ? "refusals" : "geometry");
        listed.push_back({{"name", d.name}, {"claim", d.claim}, {"share_of_cases", d.share_of_cases}, {"needs", needs},
                          {"left_out_at_case_size_small", d.left_out_at_small}});
        if (!as_json) std::printf("%-17s %s\n", d.name.c_str(), d.claim.c_str());
      }
      if (as_json) std::cout << listed.dump(2) << "\n";
      return kPassed;
    }
    std::tie(drawn.campaign.shard_index, drawn.campaign.shard_count) = parse_shard(shard);
    if (drawn.campaign.shard_count > 1 && seed_text.empty())
      throw CLI::ValidationError("--shard", "--shard " + shard + " needs --seed: without it each shard draws a fresh seed of its own, "
                                            "and the shards split no common campaign");
    if (*gate_cmd && !backend_named && port.empty())
      throw CLI::ValidationError("--port", "the gate was not told what to judge: give --port COMMAND (a kernel's port) or --backend "
                                           "reference|hip (without either it would judge the harness's own reference and pass)");
    if ((*fuzz_cmd || *gate_cmd) && min_cases > drawn.campaign.cases)
      throw CLI::ValidationError("--min-cases", std::to_string(min_cases) + " is more than the " + std::to_string(drawn.campaign.cases) +
                                                    " cases asked (--cases); expected at most that");
    drawn.campaign.seed = seed_text.empty() ? fresh_seed() : std::stoull(seed_text);
    drawn.campaign.min_cases = min_cases;
    harness::install_stop_signals();
    const harness::TimeBudget budget(time_budget);
    Report report;
    if (*merge_cmd) {
      std::vector<std::pair<std::string, nlohmann::json>> shards;
      for (const std::string& file : merge_files) {
        std::ifstream in(file, std::ios::binary);
        if (!in) throw std::invalid_argument(harness::printable(file) + ": cannot be read; expected a shard's JSON report");
        nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded()) throw std::invalid_argument(harness::printable(file) + ": not JSON; expected a shard's JSON report (--json)");
        shards.emplace_back(file, std::move(j));
      }
      report = harness::merge_shards(shards);
    } else if (*check_cmd) {
      if (check_mode == "mixed") throw CLI::ValidationError("--out-mode", "mixed is for fuzz; fixtures take given, absent, too_small or all");
      if (check_mode != "all") harness::out_mode_named(check_mode);
      if (capture && check_mode != "given")
        throw CLI::ValidationError("--capture", "a replay writes into the captured out: it takes --out-mode given, not " + check_mode);
      if (capture && repeat != 1)
        throw CLI::ValidationError("--capture", "a replay is one call: it takes no --repeat, got " + std::to_string(repeat));
      if (refusals && (capture || check_mode != "given" || repeat != 1))
        throw CLI::ValidationError("--refusals", "the refusals pass out given, once, outside a capture: it takes no --capture, "
                                                 "--repeat or --out-mode other than given");
      if (paths.empty()) paths.push_back(default_corpus());
      const std::vector<fs::path> files = fixture_files(paths);
      const auto b = harness::make_backend(backend, port);
      if (capture)
        if (const std::string& why = b->capabilities().capture; !why.empty())
          throw CLI::ValidationError("--capture", "backend " + b->name() + " records no graph here: " + why);
      harness::CorpusOptions co;
      co.modes = modes_named(check_mode);
      co.repeat = repeat;
      co.capture = capture;
      co.refusals = refusals;
      if (!as_json) co.each_call = to_stdout;
      co.say = to_stderr;
      co.budget = &budget;
      co.min_cases = min_cases;
      const harness::PhaseSeconds before = harness::phase_seconds();
      report.suites.push_back(harness::check_corpus(*b, files, co));
      report.suites.back().phases = harness::phase_difference(harness::phase_seconds(), before);
    } else if (*fuzz_cmd || *gate_cmd) {
      const std::string& mode = *fuzz_cmd ? fuzz_mode : gate_mode;
      if (mode != "mixed") harness::out_mode_named(mode);
      drawn.out_mode = mode;
      // The gate makes every fuzz call twice unless told otherwise: a kernel that is not repeatable fails there too.
      drawn.repeat = *gate_cmd && gate_cmd->get_option("--repeat")->count() == 0 ? 2 : repeat;
      drawn.campaign.budget = &budget;
      const auto b = harness::make_backend(backend, port);
      if (drawn.size.empty()) drawn.size = b->case_size();  // named, so the lines that draw a case again name it too
      drawn.campaign.redraw = harness::redraw_command(*b, drawn);
      if (*fuzz_cmd) {
        const harness::PhaseSeconds before = harness::phase_seconds();
        harness::CheckContext x;
        x.drawn = drawn;
        x.geometry_points = std::max<std::int64_t>(drawn.campaign.cases, 1000);
        report.suites.push_back(harness::run_check("fuzz", *b, x));
        report.suites.back().phases = harness::phase_difference(harness::phase_seconds(), before);
        if (harness::unmet_need(harness::check_named("geometry"), *b).empty() && !harness::stop_signal())
          report.suites.push_back(harness::run_check("geometry", *b, x));
      } else {
        harness::GatePlan gp;
        gp.checks = gate_checks;
        gp.required = gate_required;
        gp.drawn = drawn;
        gp.drawn.campaign.budget = nullptr;  // the gate shares the budget among its checks
        gp.time_budget = time_budget;
        gp.fail_fast = fail_fast;
        gp.lanes = static_cast<std::size_t>(
            jobs > 0 ? jobs : b->case_size() == "small" && std::thread::hardware_concurrency() >= 2 ? 2 : 1);
        gp.another = [&] { return harness::make_backend(backend, port); };
        gp.geometry_points = geometry_points;
        gp.corpus = fixture_files(gate_corpus.empty() ? std::vector<std::string>{default_corpus()} : gate_corpus);
        report = harness::run_gate(*b, gp);
      }
      // What the run was: `merge` holds the shards of one campaign to it.
      report.run = {{"version", CTXSCORE_VERSION},
                    {"command", *gate_cmd ? "gate" : "fuzz"},
                    {"seed", std::to_string(drawn.campaign.seed)},
                    {"shard", std::to_string(drawn.campaign.shard_index + 1) + "/" + std::to_string(drawn.campaign.shard_count)},
                    {"checks", *gate_cmd ? (gate_checks.empty() ? harness::check_names() : gate_checks) : std::vector<std::string>{"fuzz"}},
                    {"required", gate_required},
                    {"backend", b->replay_flags()},
                    {"case_size", drawn.size},
                    {"cases", drawn.campaign.cases},
                    {"compile_keys", drawn.compile_keys},
                    {"out_mode", mode},
                    {"repeat", drawn.repeat},
                    {"min_cases", min_cases},
                    {"max_failures", drawn.campaign.max_failures},
                    {"only_case", drawn.campaign.only_case},
                    {"time_budget", time_budget}};
    } else if (*verify_cmd) {
      if (const char* v = std::getenv("CTXSCORE_REQUIRE_GPU"); v && *v && std::string(v) != "0") plan.required.push_back("hip");
      verify_command(plan, report, !as_json, budget);
    }
    report.interrupted_by = harness::stop_signal();
    if ((*fuzz_cmd || *gate_cmd) && drawn.campaign.say)
      for (const harness::Suite& x : report.suites)
        if (x.name == "fuzz" && !x.compile_keys.empty()) {
          std::fprintf(stderr, "ctxscore: %zu compile keys drawn from seed %s:\n", x.compile_keys.size(), x.seed.c_str());
          for (const std::string& k : x.compile_keys) std::fprintf(stderr, "  %s\n", k.c_str());
        }
    if (!junit.empty()) harness::write_junit(report, junit, gate_cmd->parsed() || merge_cmd->parsed());
    if (as_json) std::cout << report.json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else std::cout << report.table() << (timings ? "\nwhere the time went (seconds):\n" + report.timings() : "");
    std::cout.flush();
    return harness::exit_status(report);
  } catch (const CLI::Error& e) {
    app.exit(e);
    junit_error("usage", e.what());
    return kBadInput;
  } catch (const harness::Unavailable& e) {
    std::fprintf(stderr, "ctxscore: environment: %s\nctxscore: nothing was judged; this is no verdict on the implementation\n",
                 harness::printable(e.what).c_str());
    junit_error("environment", e.what + "; nothing was judged");
    return kUnavailable;
  } catch (const harness::Interrupted&) {
    std::fprintf(stderr, "ctxscore: interrupted before any report\n");
    junit_error("run", "interrupted by signal " + std::to_string(harness::stop_signal()) + " before any report");
    return kInterrupted;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ctxscore: %s\n", e.what());
    junit_error("run", e.what());
    return kBadInput;
  }
}

// `ctxscore`: the launch geometry, fixtures (generate, check), fuzzing of a
// backend against its oracle, and `verify`, the job ci/verify runs.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "backends.hpp"
#include "ctxscore/fixture.hpp"

namespace ctxscore::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct Totals {
  std::int64_t cases = 0, failures = 0;
  double worst_ratio = 0, seconds = 0;
};

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
  fs::create_directories(out);
  std::vector<std::pair<std::string, Case>> cases;
  const std::vector<Case> corpus = corpus_cases();
  if (cls.empty()) {
    for (const Case& c : corpus) cases.emplace_back(c.label, c);
  } else if (const auto it = std::find_if(corpus.begin(), corpus.end(), [&](const Case& c) { return c.label == cls; });
             it != corpus.end()) {
    cases.emplace_back(it->label, *it);
  } else {
    const auto classes = random_classes();
    const auto r = std::find_if(classes.begin(), classes.end(), [&](const auto& k) { return k.first == cls; });
    if (r == classes.end()) {
      std::string names;
      for (const auto& k : classes) names += " " + k.first;
      for (const Case& c : corpus) names += " " + c.label;
      throw CLI::ValidationError("--class", "\"" + cls + "\" is not a class; expected one of:" + names);
    }
    for (std::int64_t k = 0; k < count; ++k) {
      Case c = gen::sample_case(r->second, seed + static_cast<std::uint64_t>(k));
      c.label = cls;
      cases.emplace_back(cls + "_seed" + std::to_string(seed + static_cast<std::uint64_t>(k)), c);
    }
  }
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

Totals check_fixtures(const std::vector<fs::path>& files, const Backend& b, json* rows, bool print) {
  Totals t;
  const auto t0 = Clock::now();
  for (const fs::path& path : files) {
    ++t.cases;
    json row = {{"fixture", path.string()}, {"backend", b.name}};
    try {
      const Fixture f = read_fixture(path.string());
      HostCase h = f.host();
      const CompareReport r = judge(f, b.run(h));
      t.worst_ratio = std::max(t.worst_ratio, r.worst_ratio);
      row["verdict"] = r.ok() ? "ok" : "mismatch";
      row["written"] = r.written;
      row["worst_ratio"] = r.worst_ratio;
      if (!r.ok()) {
        ++t.failures;
        row["report"] = r.summary();
      }
      if (print)
        std::printf("%-8s %-52s written %7lld  worst ratio %.3g%s%s\n", r.ok() ? "ok" : "MISMATCH",
                    path.filename().string().c_str(), static_cast<long long>(r.written), r.worst_ratio,
                    r.ok() ? "" : "\n         ", r.ok() ? "" : r.summary().c_str());
    } catch (const std::exception& e) {
      ++t.failures;
      row["verdict"] = "error";
      row["report"] = e.what();
      if (print) std::printf("%-8s %s\n", "ERROR", e.what());
    }
    if (rows) rows->push_back(row);
  }
  t.seconds = since(t0);
  return t;
}

// ---- fuzz -------------------------------------------------------------------

Totals fuzz(const Backend& b, std::int64_t cases, std::uint64_t seed, const std::string& failures_dir, json* rows,
            bool print) {
  Totals t;
  const bool tty = print && isatty(fileno(stderr));
  const auto t0 = Clock::now();
  for (std::int64_t k = 0; k < cases; ++k) {
    const std::uint64_t case_seed = seed + static_cast<std::uint64_t>(k);
    const Case c = gen::sample_case(b.fuzz_limits, case_seed);
    HostCase h = materialize(c);
    const std::vector<float> before = h.out;
    ScoreArgs oracle_args = h.args();
    oracle_args.out.reset();
    const ShardScores expected = b.oracle(oracle_args);
    const std::vector<float> after = b.run(h);
    const CompareReport r = compare(expected, h.out_layout(), before.data(), after.data(),
                                    static_cast<std::int64_t>(after.size()));
    ++t.cases;
    t.worst_ratio = std::max(t.worst_ratio, r.worst_ratio);
    if (!r.ok()) {
      ++t.failures;
      fs::create_directories(failures_dir);
      const fs::path path = fs::path(failures_dir) / (b.name + "_seed" + std::to_string(case_seed) + ".safetensors");
      std::string written;
      try {
        write_fixture(path.string(), make_fixture(c));
        written = path.string();
      } catch (const std::exception& e) {
        written = std::string("(fixture not written: ") + e.what() + ")";
      }
      if (print)
        std::fprintf(stderr, "%sFAIL case %lld, seed %llu (replay: ctxscore fuzz --backend %s --cases 1 --seed %llu)\n  %s\n  %s\n  fixture: %s\n",
                     tty ? "\r" : "", static_cast<long long>(k), static_cast<unsigned long long>(case_seed),
                     b.name.c_str(), static_cast<unsigned long long>(case_seed), c.str().c_str(), r.summary().c_str(),
                     written.c_str());
      if (rows) rows->push_back({{"seed", case_seed}, {"case", c.str()}, {"report", r.summary()}, {"fixture", written}});
    }
    if (tty && (k % 16 == 15 || k + 1 == cases))
      std::fprintf(stderr, "\r[%lld/%lld] %s vs %s: %lld failures, worst ratio %.3g", static_cast<long long>(k + 1),
                   static_cast<long long>(cases), b.name.c_str(), b.oracle_name.c_str(),
                   static_cast<long long>(t.failures), t.worst_ratio);
  }
  if (tty) std::fprintf(stderr, "\n");
  t.seconds = since(t0);
  return t;
}

// ---- verify -----------------------------------------------------------------

std::string default_corpus() {
  if (fs::is_directory("fixtures/corpus")) return "fixtures/corpus";
  return CTXSCORE_SOURCE_DIR "/fixtures/corpus";
}

int verify_command(const std::string& corpus, std::int64_t ref_cases, std::int64_t hip_cases, std::uint64_t seed,
                   bool as_json) {
  const std::vector<fs::path> files = fixture_files({corpus});
  json table = json::array();
  bool failed = false;
  std::vector<std::string> absent;
  if (!as_json)
    std::printf("ctxscore verify: corpus %s (%zu fixtures), fuzz seed %llu\n", corpus.c_str(), files.size(),
                static_cast<unsigned long long>(seed));
  for (const Backend& b : all_backends()) {
    if (!b.unavailable.empty()) {
      absent.push_back(b.name + ": " + b.unavailable);
      table.push_back({{"backend", b.name}, {"available", false}, {"reason", b.unavailable}});
      continue;
    }
    const std::int64_t n = b.name == "hip" ? hip_cases : ref_cases;
    const Totals c = check_fixtures(files, b, nullptr, false);
    const Totals z = fuzz(b, n, seed, "ctxscore-failures", nullptr, !as_json);
    failed = failed || c.failures > 0 || z.failures > 0;
    table.push_back({{"backend", b.name}, {"available", true},
                     {"corpus", {{"cases", c.cases}, {"failures", c.failures}, {"worst_ratio", c.worst_ratio}, {"seconds", c.seconds}}},
                     {"fuzz", {{"oracle", b.oracle_name}, {"cases", z.cases}, {"failures", z.failures}, {"worst_ratio", z.worst_ratio}, {"seconds", z.seconds}}}});
  }
  if (as_json) {
    std::cout << json{{"ok", !failed}, {"backends", table}}.dump(2) << "\n";
    return failed ? 1 : 0;
  }
  std::printf("\n%-10s %-8s %7s %9s %12s %9s\n", "backend", "suite", "cases", "failures", "worst ratio", "time (s)");
  for (const json& row : table) {
    if (!row["available"]) continue;
    for (const char* suite : {"corpus", "fuzz"}) {
      const json& s = row[suite];
      std::printf("%-10s %-8s %7lld %9lld %12.3g %9.2f\n", row["backend"].get<std::string>().c_str(), suite,
                  s["cases"].get<long long>(), s["failures"].get<long long>(), s["worst_ratio"].get<double>(),
                  s["seconds"].get<double>());
    }
  }
  for (const std::string& a : absent) std::printf("not available: %s\n", a.c_str());
  std::printf("%s\n", failed ? "verify: FAILED" : "verify: all available backends passed");
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace ctxscore::cli

int main(int argc, char** argv) {
  using namespace ctxscore::cli;
  CLI::App app{"ctxscore: launch geometry, fixtures, fuzzing and verification of the context-parallel block scoring"};
  app.require_subcommand(1);

  std::int64_t batch = 0, bound = 0, world = 1, heads = 4, query_len = 1;
  bool as_json = false;
  auto* geo = app.add_subcommand("geometry", "The contract's production launch geometry for one call");
  geo->add_option("--batch", batch, "requests B")->required()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 31));
  geo->add_option("--max-seq-len", bound, "the capture-stable bound S")->required()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  geo->add_option("--world", world, "context-parallel world size")->required()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  geo->add_option("--heads", heads, "index heads H")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  geo->add_option("--query-len", query_len, "query tokens per request QL")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  geo->add_flag("--json", as_json, "print JSON");

  auto* fixtures = app.add_subcommand("fixtures", "Generate or check .safetensors fixtures (fixtures/FORMAT.md)");
  fixtures->require_subcommand(1);
  std::string out_dir, cls, backend = "reference";
  std::uint64_t seed = 1;
  std::int64_t count = 1;
  auto* gen_cmd = fixtures->add_subcommand("generate", "Write fixtures: the named corpus by default, or --count cases of --class");
  gen_cmd->add_option("--out", out_dir, "directory to write into")->required();
  gen_cmd->add_option("--class", cls, "a corpus case name, or a random class: random, gpu, m3");
  gen_cmd->add_option("--seed", seed, "first generator seed of a random class")->capture_default_str();
  gen_cmd->add_option("--count", count, "cases of a random class")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  std::vector<std::string> paths;
  auto* check_cmd = fixtures->add_subcommand("check", "Run a backend on fixtures and judge it; non-zero exit on any mismatch");
  check_cmd->add_option("PATH", paths, "fixture files or directories")->required();
  check_cmd->add_option("--backend", backend, "reference or hip")->capture_default_str();
  check_cmd->add_flag("--json", as_json, "print JSON");

  std::int64_t cases = 100;
  std::string failures = "ctxscore-failures";
  auto* fuzz_cmd = app.add_subcommand("fuzz", "Random cases against the backend's oracle; failures become fixtures");
  fuzz_cmd->add_option("--backend", backend, "reference (oracle: the plain-loop scorer) or hip (oracle: the reference)")->capture_default_str();
  fuzz_cmd->add_option("--cases", cases, "how many cases")->capture_default_str()->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  fuzz_cmd->add_option("--seed", seed, "case k uses seed + k")->capture_default_str();
  fuzz_cmd->add_option("--failures", failures, "where failing cases are written")->capture_default_str();
  fuzz_cmd->add_flag("--json", as_json, "print JSON");

  std::string corpus = default_corpus();
  std::int64_t ref_cases = 2000, hip_cases = 3000;
  auto* verify_cmd = app.add_subcommand("verify", "Every backend present over the corpus plus a fuzz budget; a summary table");
  verify_cmd->add_option("--corpus", corpus, "fixture directory")->capture_default_str();
  verify_cmd->add_option("--reference-cases", ref_cases, "fuzz cases for the reference")->capture_default_str()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  verify_cmd->add_option("--hip-cases", hip_cases, "fuzz cases for the kernel")->capture_default_str()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  verify_cmd->add_option("--seed", seed, "fuzz seed")->capture_default_str();
  verify_cmd->add_flag("--json", as_json, "print JSON");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*geo) return geometry_command(batch, bound, world, heads, query_len, as_json);
    if (*gen_cmd) return generate_command(out_dir, cls, seed, count);
    if (*check_cmd) {
      const Backend& b = backend_named(backend);
      json rows = json::array();
      const Totals t = check_fixtures(fixture_files(paths), b, as_json ? &rows : nullptr, !as_json);
      if (as_json)
        std::cout << json{{"backend", b.name}, {"cases", t.cases}, {"failures", t.failures}, {"worst_ratio", t.worst_ratio}, {"fixtures", rows}}.dump(2) << "\n";
      else
        std::printf("%lld fixtures, %lld failing, worst error/bound ratio %.3g (%s, %.2f s)\n", static_cast<long long>(t.cases),
                    static_cast<long long>(t.failures), t.worst_ratio, b.name.c_str(), t.seconds);
      return t.failures ? 1 : 0;
    }
    if (*fuzz_cmd) {
      const Backend& b = backend_named(backend);
      json rows = json::array();
      const Totals t = fuzz(b, cases, seed, failures, as_json ? &rows : nullptr, !as_json);
      if (as_json)
        std::cout << json{{"backend", b.name}, {"oracle", b.oracle_name}, {"seed", seed}, {"cases", t.cases}, {"failures", t.failures}, {"worst_ratio", t.worst_ratio}, {"seconds", t.seconds}, {"failing", rows}}.dump(2) << "\n";
      else
        std::printf("fuzz %s vs %s: %lld cases from seed %llu, %lld failing, worst error/bound ratio %.3g, %.2f s (%.0f cases/s)\n",
                    b.name.c_str(), b.oracle_name.c_str(), static_cast<long long>(t.cases), static_cast<unsigned long long>(seed),
                    static_cast<long long>(t.failures), t.worst_ratio, t.seconds, t.cases / std::max(t.seconds, 1e-9));
      return t.failures ? 1 : 0;
    }
    if (*verify_cmd) return verify_command(corpus, ref_cases, hip_cases, seed, as_json);
  } catch (const CLI::Error& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ctxscore: %s\n", e.what());
    return 2;
  }
  return 0;
}

// corpus and corpus_capture: every fixture judged against its stored
// expectation, in each way of passing out, or through a recorded graph.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "ctxscore/harness/checks.hpp"

namespace ctxscore::harness {

namespace fs = std::filesystem;

namespace {

constexpr const char* kOracle = "the fixtures' expectations";

}  // namespace

std::vector<fs::path> fixture_files(const std::vector<std::string>& inputs) {
  std::vector<fs::path> files;
  for (const std::string& in : inputs) {
    if (fs::is_directory(in)) {
      std::vector<fs::path> dir;
      for (const auto& e : fs::directory_iterator(in))
        if (e.path().extension() == ".safetensors") dir.push_back(e.path());
      if (dir.empty()) throw std::invalid_argument(printable(in) + " holds no .safetensors files");
      std::sort(dir.begin(), dir.end());
      files.insert(files.end(), dir.begin(), dir.end());
    } else if (fs::exists(in)) {
      files.emplace_back(in);
    } else {
      throw std::invalid_argument(printable(in) + " does not exist");
    }
  }
  return files;
}

Suite check_corpus(Backend& b, const std::vector<fs::path>& files, const CorpusOptions& o) {
  Suite s = suite_for(o.capture ? "corpus_capture" : "corpus", b, kOracle);
  s.min_cases = o.min_cases >= 0 ? o.min_cases : static_cast<std::int64_t>(files.size() * o.modes.size());
  const auto t0 = std::chrono::steady_clock::now();
  Progress progress;
  for (const fs::path& path : files) {
    if (s.stopped = stop_reason(o.budget, static_cast<std::int64_t>(s.rows.size())); !s.stopped.empty()) break;
    if (o.say && progress.due())
      o.say("ctxscore: " + b.name() + " " + s.name + ": " + std::to_string(s.rows.size()) + " calls judged, " +
            std::to_string(s.stats.failures) + " failing\n");
    Fixture f;
    try {
      f = read_fixture(path.string());
    } catch (const std::exception& e) {
      s.add_error(path.filename().string(), std::string("malformed fixture: ") + e.what());
      if (o.each_call) o.each_call("BAD      " + printable(e.what()) + "\n");
      continue;
    }
    for (OutMode m : o.modes) {
      JudgeOptions jo;
      jo.out = m;
      jo.repeat = o.repeat;
      jo.capture = o.capture;
      jo.refusals = o.refusals;
      Verdict v;
      try {
        v = run_and_judge(b, f, jo);
      } catch (const Interrupted&) {
        break;  // the next round names the signal
      }
      const std::string name = path.filename().string() + (m == OutMode::given ? "" : std::string(" out=") + out_mode_name(m));
      s.add(name, v, with_replay_line(fs::absolute(path).string(), replay_flags(b, jo)));
      if (o.each_call) {
        std::string shown = printable(name);
        shown.resize(std::max<std::size_t>(shown.size(), 60), ' ');
        char figures[96];
        std::snprintf(figures, sizeof figures, " written %7lld  worst ratio %.3g", static_cast<long long>(v.report.written),
                      v.report.worst_ratio);
        o.each_call(std::string(v.ok() ? "ok      " : "FAIL    ") + " " + shown + figures +
                    (v.ok() ? std::string() : "\n         " + printable_lines(s.rows.back().message, "\n         ")) + "\n");
      }
    }
  }
  if (s.stopped.empty() && stop_signal()) s.stopped = stop_reason(o.budget, static_cast<std::int64_t>(s.rows.size()));
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

namespace {

Suite run_corpus(Backend& b, const CheckContext& x, bool capture) {
  CorpusOptions co;
  co.capture = capture;
  co.modes = capture ? std::vector<OutMode>{OutMode::given} : std::vector<OutMode>{OutMode::given, OutMode::absent, OutMode::too_small};
  co.budget = x.drawn.campaign.budget;
  co.say = x.drawn.campaign.say;
  if (x.drawn.campaign.min_cases >= 0)
    co.min_cases = std::min<std::int64_t>(x.drawn.campaign.min_cases, static_cast<std::int64_t>(x.corpus.size() * co.modes.size()));
  return check_corpus(b, x.corpus, co);
}

}  // namespace

CheckDef corpus_check() {
  return {"corpus", "every corpus fixture (upstream's tests, peer suites' cases, edge classes), out given, absent, too small",
          0, {}, kOracle, false, false, [](Backend& b, const CheckContext& x) { return run_corpus(b, x, false); }};
}

CheckDef corpus_capture_check() {
  return {"corpus_capture", "every corpus fixture through a recorded graph", 0, {Need::capture}, kOracle, false, false,
          [](Backend& b, const CheckContext& x) { return run_corpus(b, x, true); }};
}

}  // namespace ctxscore::harness

// corpus and corpus_capture: every fixture judged against its stored
// expectation, in each way of passing out, or through a recorded graph.
#include <algorithm>
#include <chrono>

#include "ctxscore/harness/checks.hpp"

namespace ctxscore::harness {

namespace fs = std::filesystem;

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
  Suite s = suite_for(o.capture ? "corpus_capture" : "corpus", b, "the fixtures' expectations");
  s.min_cases = o.min_cases >= 0 ? o.min_cases : static_cast<std::int64_t>(files.size() * o.modes.size());
  const auto t0 = std::chrono::steady_clock::now();
  Progress progress;
  for (const fs::path& path : files) {
    if (s.stopped = stop_reason(o.budget, static_cast<std::int64_t>(s.rows.size())); !s.stopped.empty()) break;
    if (progress.due())
      std::fprintf(stderr, "ctxscore: %s %s: %zu calls judged, %lld failing\n", b.name().c_str(), s.name.c_str(),
                   s.rows.size(), static_cast<long long>(s.stats.failures));
    Fixture f;
    try {
      f = read_fixture(path.string());
    } catch (const std::exception& e) {
      s.add_error(path.filename().string(), std::string("malformed fixture: ") + e.what());
      if (o.print) std::printf("%-8s %s\n", "BAD", printable(e.what()).c_str());
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
      if (o.print)
        std::printf("%-8s %-60s written %7lld  worst ratio %.3g%s%s\n", v.ok() ? "ok" : "FAIL", printable(name).c_str(),
                    static_cast<long long>(v.report.written), v.report.worst_ratio, v.ok() ? "" : "\n         ",
                    v.ok() ? "" : printable_lines(s.rows.back().message, "\n         ").c_str());
    }
  }
  if (s.stopped.empty() && stop_signal()) s.stopped = stop_reason(o.budget, static_cast<std::int64_t>(s.rows.size()));
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace ctxscore::harness

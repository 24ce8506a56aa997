#include "ctxscore/harness/report.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ctxscore::harness {

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char ch : text) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

std::uint64_t fingerprint(const Case& c) { return fnv1a(c.str()); }

void Suite::add(const std::string& row, const Verdict& v, const FailureFile& where) {
  stats.add(v);
  judged.emplace_back(row, fingerprint(v.spec));
  std::string message;
  if (!v.ok()) {
    message = v.str();
    if (const std::string why = explain_first_mismatch(v); !why.empty()) message += "\n  " + why;
  }
  rows.push_back({row, v.ok(), message, where, v.ok() ? "" : v.spec.str(), false,
                  !v.ok() && v.error.empty() && v.invariance.empty(), v.ok() ? "" : fault_name(v.fault),
                  v.ok() ? std::map<std::string, std::string>{} : v.details});
}

void Suite::add_error(const std::string& row, const std::string& message) {
  ++errors;
  rows.push_back({row, false, message, {}, "", true, false, "input", {}});
}

bool Suite::too_few() const { return not_run.empty() && stats.cases < min_cases; }

bool Suite::ok() const {
  return stats.failures == 0 && errors == 0 && !too_few() && coverage.empty() && (not_run.empty() || !required);
}

std::string Suite::status() const {
  if (!not_run.empty()) return required ? "NOT RUN (required)" : "not run";
  return ok() ? "passed" : "FAILED";
}

std::string Suite::summary() const {
  std::ostringstream o;
  o.precision(3);
  o << name << ": " << status();
  if (!not_run.empty()) return o.str() + ": " + not_run;
  if (!same_mismatch_as.empty())
    o << " on the scores off the reference that " << same_mismatch_as << " reports, met again before its own claim was judged";
  o << ", " << stats.cases << " cases";
  if (errors) o << " and " << errors << " unreadable";
  if (stats.failures) o << ", " << stats.failures << " failing";
  o << ", worst error/bound ratio " << stats.worst_ratio;
  // A ratio within the bound beside a failure would read as a near miss.
  if (stats.failures && stats.worst_ratio <= 1) o << " (the failures are not of the bound: see their kinds)";
  if (!seed.empty()) o << ", seed " << seed;
  o << ", " << static_cast<long long>(seconds + 0.5) << " s";
  if (too_few()) o << "; judged " << stats.cases << " of the " << min_cases << " it must judge";
  if (!coverage.empty()) o << "; " << coverage;
  if (!stopped.empty()) o << " (" << stopped << ")";
  return o.str();
}

bool Report::ok() const {
  if (interrupted_by || !required_absent.empty()) return false;
  for (const Suite& s : suites)
    if (!s.ok()) return false;
  return true;
}

ExitStatus exit_status(const Report& r) {
  if (r.interrupted_by) return kInterrupted;
  std::int64_t failures = 0, malformed = 0;
  for (const Suite& s : r.suites) {
    failures += s.stats.failures;
    malformed += s.errors;
  }
  if (failures > 0) return kFailed;
  if (malformed > 0) return kBadInput;
  return r.ok() ? kPassed : kFailed;
}

std::string Report::table() const {
  std::ostringstream o;
  char line[256];
  std::snprintf(line, sizeof line, "\n%-10s %-16s %8s %9s %7s %12s %9s\n", "backend", "suite", "calls", "failures",
                "errors", "worst ratio", "time (s)");
  o << line;
  for (const Suite& s : suites) {
    std::snprintf(line, sizeof line, "%-10s %-16s %8lld %9lld %7lld %12.3g %9.2f\n", s.backend.c_str(), s.name.c_str(),
                  static_cast<long long>(s.stats.cases + s.errors), static_cast<long long>(s.stats.failures),
                  static_cast<long long>(s.errors), s.stats.worst_ratio, s.seconds);
    o << line;
  }
  for (const Suite& s : suites) {
    o << "  " << s.backend << " " << s.summary() << "\n";
    if (!s.not_run.empty()) continue;
    o << "    vs " << s.oracle << ": " << s.stats.str() << "\n";
    o << "    toolchain: " << printable(s.toolchain) << "\n";
    if (!s.stopped.empty()) o << "    stopped early: " << s.stopped << "\n";
    int shown = 0;
    for (const Row& r : s.rows)
      if (!r.ok && shown++ < 5)
        o << "    FAIL " << printable(r.name) << ": " << printable_lines(r.message, "\n      ")
          << (r.spec.empty() ? "" : "\n      case: " + printable(r.spec))
          << (r.where.empty() ? "" : "\n      fixture: " + printable(r.where.str())) << "\n";
  }
  for (const std::string& a : absent) o << "not available: " << a << "\n";
  for (const std::string& a : required_absent) o << "REQUIRED but not available: " << a << "\n";
  if (interrupted_by) o << "result: INTERRUPTED by signal " << interrupted_by << " (the cases above were judged)\n";
  else o << (ok() ? "result: every backend that ran passed\n" : "result: FAILED\n");
  return o.str();
}

namespace {

double harness_rest(const Suite& s) {
  double rest = s.seconds;
  for (const double v : s.phases) rest -= v;
  return std::max(rest, 0.0);
}

nlohmann::ordered_json by_phase(const Suite& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (std::size_t k = 0; k < kPhases; ++k) j[phase_name(static_cast<Phase>(k))] = s.phases[k];
  j["harness"] = harness_rest(s);
  return j;
}

}  // namespace

std::string Report::timings() const {
  std::ostringstream o;
  char line[256];
  std::snprintf(line, sizeof line, "%-17s %8s %8s %9s %14s %9s %8s %8s\n", "check", "seconds", "setup", "reference",
                "implementation", "transfer", "judge", "harness");
  o << line;
  for (const Suite& s : suites) {
    if (!s.not_run.empty()) continue;
    std::snprintf(line, sizeof line, "%-17s %8.2f %8.2f %9.2f %14.2f %9.2f %8.2f %8.2f\n", s.name.c_str(), s.seconds,
                  s.phases[0], s.phases[1], s.phases[2], s.phases[3], s.phases[4], harness_rest(s));
    o << line;
  }
  return o.str();
}

nlohmann::ordered_json Report::json() const {
  nlohmann::ordered_json j = {{"ok", ok()}, {"interrupted_by", interrupted_by}, {"suites", nlohmann::ordered_json::array()},
                              {"not_available", absent}, {"required_not_available", required_absent}};
  for (const Suite& s : suites) {
    nlohmann::ordered_json judged = nlohmann::ordered_json::array();
    for (const auto& [name, print] : s.judged) judged.push_back({name, print});
    nlohmann::ordered_json failing = nlohmann::ordered_json::array();
    for (const Row& r : s.rows)
      if (!r.ok)
        failing.push_back({{"name", r.name}, {"message", r.message}, {"where", r.where.str()}, {"fixture", r.where.path},
                           {"replay", r.where.replay()}, {"replay_program", r.where.program}, {"replay_flags", r.where.flags}, {"replay_reproduces", !r.where.path.empty() && !r.where.one_call},
                           {"not_written", r.where.not_written}, {"case", r.spec}, {"kind", r.kind}, {"details", r.details},
                           {"error", r.error}, {"off_the_oracle", r.off_the_oracle}});
    j["suites"].push_back({{"suite", s.name}, {"backend", s.backend}, {"oracle", s.oracle}, {"toolchain", s.toolchain},
                           {"calls", s.stats.cases + s.errors}, {"failures", s.stats.failures}, {"errors", s.errors},
                           {"worst_ratio", s.stats.worst_ratio}, {"written", s.stats.written},
                           {"out_modes", s.stats.out_modes}, {"shapes", s.stats.shapes}, {"seconds", s.seconds},
                           {"seconds_by_phase", by_phase(s)},
                           {"stopped", s.stopped}, {"status", s.status()}, {"ok", s.ok()}, {"not_run", s.not_run},
                           {"required", s.required},
                           {"min_cases", s.min_cases}, {"seed", s.seed}, {"compile_keys", s.compile_keys}, {"coverage", s.coverage},
                           {"same_mismatch_as", s.same_mismatch_as},
                           {"summary", s.summary()}, {"failing", failing}, {"judged", judged}});
  }
  if (!run.empty()) j["run"] = run;
  return j;
}

namespace {

// Text as XML character data: markup escaped, control bytes and invalid
// UTF-8 as U+FFFD, so that a port's stderr or a file name cannot break the file.
std::string xml(const std::string& s) {
  std::string o;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_char_length(s, i);
    const char ch = s[i];
    if (n == 0 || (n == 1 && static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t')) {
      o += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o.append(s, i, n);
    }
    i += n;
  }
  return o;
}

// One testcase per check: its status, with the failing rows' verdicts,
// cases and fixtures in the failure's text.
void junit_per_check(std::ostringstream& o, const Report& r) {
  std::int64_t failed = 0, skipped = 0;
  double seconds = 0;
  for (const Suite& s : r.suites) {
    failed += !s.ok();
    skipped += !s.not_run.empty() && !s.required;
    seconds += s.seconds;
  }
  o << "  <testsuite name=\"ctxscore.gate\" tests=\"" << r.suites.size() << "\" failures=\"" << failed << "\" skipped=\""
    << skipped << "\" time=\"" << seconds << "\">\n";
  for (const Suite& s : r.suites) {
    o << "    <testcase classname=\"" << xml(s.backend) << "\" name=\"" << xml(s.name) << "\" time=\"" << s.seconds << "\">\n";
    o << "      <properties><property name=\"toolchain\" value=\"" << xml(s.toolchain) << "\"/><property name=\"summary\" value=\""
      << xml(s.summary()) << "\"/></properties>\n";
    if (!s.not_run.empty() && !s.required) {
      o << "      <skipped message=\"" << xml(s.not_run) << "\"/>\n";
    } else if (!s.ok()) {
      std::string text = s.summary();
      for (const Row& row : s.rows)
        if (!row.ok)
          text += "\n" + row.name + ": " + row.message + (row.spec.empty() ? "" : "\ncase: " + row.spec) +
                  (row.where.empty() ? "" : "\nfixture: " + row.where.str());
      o << "      <failure message=\"" << xml(s.summary().substr(0, 300)) << "\">" << xml(text) << "</failure>\n";
    }
    o << "    </testcase>\n";
  }
  o << "  </testsuite>\n";
}

// What fails a run outside its checks: a stop signal, a required backend
// that could not run. A reader of the file alone sees them too.
// Errors of the run itself (no check's), as a suite of error testcases.
void junit_errors(std::ostringstream& o, const std::vector<std::pair<std::string, std::string>>& problems) {
  if (problems.empty()) return;
  o << "  <testsuite name=\"ctxscore.run\" tests=\"" << problems.size() << "\" failures=\"0\" errors=\"" << problems.size() << "\">\n";
  for (const auto& [name, message] : problems)
    o << "    <testcase classname=\"ctxscore\" name=\"" << xml(name) << "\">\n      <error message=\"" << xml(message)
      << "\"/>\n    </testcase>\n";
  o << "  </testsuite>\n";
}

void junit_run(std::ostringstream& o, const Report& r) {
  std::vector<std::pair<std::string, std::string>> problems;  // testcase, message
  if (r.interrupted_by)
    problems.emplace_back("run", "interrupted by signal " + std::to_string(r.interrupted_by) + " before every case was judged");
  for (const std::string& a : r.required_absent) problems.emplace_back("required backend", "required but not available: " + a);
  junit_errors(o, problems);
}

// The XML at `path`, or nothing: never a half-written file.
void write_xml(const std::string& text, const std::string& path) {
  const std::string tmp = path + ".partial";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!(f << text) || !f.flush()) throw std::runtime_error("--junit: cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("--junit: cannot rename " + tmp + " to " + path);
  }
}

constexpr const char* kJunitHead = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"ctxscore\">\n";

}  // namespace

void write_junit(const Report& r, const std::string& path, bool per_check) {
  std::ostringstream o;
  o << kJunitHead;
  if (per_check) junit_per_check(o, r);
  for (const Suite& s : per_check ? std::vector<Suite>{} : r.suites) {
    std::int64_t failed = 0;
    for (const Row& row : s.rows) failed += !row.ok;
    o << "  <testsuite name=\"" << xml(s.backend + "." + s.name) << "\" tests=\"" << s.rows.size() << "\" failures=\""
      << failed - s.errors << "\" errors=\"" << s.errors << "\" time=\"" << s.seconds << "\">\n";
    o << "    <properties><property name=\"toolchain\" value=\"" << xml(s.toolchain) << "\"/>";
    if (!s.stopped.empty()) o << "<property name=\"stopped\" value=\"" << xml(s.stopped) << "\"/>";
    o << "</properties>\n";
    for (const Row& row : s.rows) {
      o << "    <testcase classname=\"" << xml(s.backend + "." + s.name) << "\" name=\"" << xml(row.name) << "\"";
      if (row.ok) {
        o << "/>\n";
        continue;
      }
      const char* tag = row.error ? "error" : "failure";
      o << ">\n      <" << tag << " message=\"" << xml(row.message.substr(0, 200)) << "\">" << xml(row.message)
        << (row.where.empty() ? "" : "\n" + xml(row.where.str())) << "</" << tag << ">\n    </testcase>\n";
    }
    o << "  </testsuite>\n";
  }
  junit_run(o, r);
  o << "</testsuites>\n";
  write_xml(o.str(), path);
}

void write_junit_error(const std::string& testcase, const std::string& message, const std::string& path) {
  std::ostringstream o;
  o << kJunitHead;
  junit_errors(o, {{testcase, message}});
  o << "</testsuites>\n";
  write_xml(o.str(), path);
}

}  // namespace ctxscore::harness

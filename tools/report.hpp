// What the command line reports about a run: one suite per (backend, corpus
// or fuzz), as a text table, JSON, or JUnit XML for CI systems.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ctxscore/harness/judge.hpp"

namespace ctxscore::cli {

struct Row {
  std::string name;      // the fixture or the seed
  bool ok = true;
  std::string message;   // the verdict, when it failed
  std::string where;     // the fixture it came from or was written to
  std::string spec;      // the case line (the shrunk one for a failing fuzz case)
  bool error = false;    // an input that could not be judged, not a failing backend
};

struct Suite {
  std::string name, backend, oracle;
  std::string toolchain;  // the backend's (Backend::toolchain)
  harness::JudgeStats stats;
  std::vector<Row> rows;
  std::int64_t errors = 0;  // inputs that could not be judged (malformed fixtures)
  double seconds = 0;
  std::string stopped;      // why the suite ended before its last case (budget, signal); empty when it ran whole
  // Every judged row's name and a fingerprint of its case: shards of a run
  // can be checked to judge exactly the cases of the whole run.
  std::vector<std::pair<std::string, std::uint64_t>> judged;
  void add(const std::string& row, const harness::Verdict& v, const std::string& where);
  void add_error(const std::string& row, const std::string& message);
  bool ok() const { return stats.failures == 0 && errors == 0; }
};

struct Report {
  std::vector<Suite> suites;
  std::vector<std::string> absent;  // backends that could not run, with why
  std::vector<std::string> required_absent;  // backends that had to run and could not: a failure
  int interrupted_by = 0;           // the stop signal that ended the run early, 0 when none
  bool ok() const;
  std::string table() const;
  nlohmann::ordered_json json() const;
};

// A stable fingerprint of a case (FNV-1a of its one-line spec).
std::uint64_t fingerprint(const Case& c);

// Throws std::runtime_error when the file cannot be written.
void write_junit(const Report& r, const std::string& path);

}  // namespace ctxscore::cli

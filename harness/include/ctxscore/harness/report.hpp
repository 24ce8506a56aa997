// What a run reports: one suite per check (fuzz, repeatability, the corpus,
// ...) and backend, as a text table, JSON, or JUnit XML for CI systems.
// A check that judged fewer cases than its floor, or that could not run
// where it was required, has not passed.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/phases.hpp"
#include "ctxscore/wire_format.hpp"

namespace ctxscore::harness {

struct Row {
  std::string name;      // the fixture or the seed
  bool ok = true;
  std::string message;   // the verdict, when it failed
  FailureFile where;     // the fixture it came from or was written to, with its replay line
  std::string spec;      // the case line (the shrunk one for a failing drawn case)
  bool error = false;    // an input that could not be judged, not a failing backend
  bool off_the_oracle = false;  // failed as scores off the oracle's (not a raised error, nor bits that changed between calls)
  std::string kind;      // a failing row's fault (fault_name: mismatch, raised, hung, not_repeatable, ...); "" when it passed
  std::map<std::string, std::string> details;  // the failing verdict's particulars (Verdict::details)
};

// What a run's stratum of one coverage floor held (campaign.hpp): the cases
// drawn into its class, those that fell in it, the first that did not, and
// those the run could not draw so.
struct StratumTally {
  std::string claim;
  double share = 0;
  std::int64_t drawn = 0, held = 0, unreachable = 0;
  std::int64_t first_miss = -1;
  // Case k of the stratum: drawn into its class (or not, where the run
  // cannot hold it), and whether it fell in it.
  void add(std::int64_t k, bool drawn_in, bool in_class);
};

struct Suite {
  std::string name, backend, oracle;
  std::string toolchain;  // the backend's (Backend::toolchain)
  JudgeStats stats;
  std::vector<Row> rows;
  std::int64_t errors = 0;  // inputs that could not be judged (malformed fixtures)
  double seconds = 0;
  // Where those seconds went (phases.hpp), where the runner measured it;
  // the rest is the harness's own drawing, shrinking and bookkeeping.
  PhaseSeconds phases{};
  std::string stopped;      // why the suite ended before its last case (budget, signal, first failure); empty when it ran whole
  // The floor: a suite that judged fewer cases fails ("judged nothing" is
  // never a pass). 0 for suites that take every case they are given.
  std::int64_t min_cases = 0;
  std::string not_run;      // why the check could not run here; empty when it ran
  bool required = false;    // a check that must run: "not run" fails it
  std::string seed;         // the seed its cases came from, where drawn
  std::vector<std::string> compile_keys;  // the keys its cases were drawn from, where a run held them to a few
  std::string coverage;     // a coverage floor not met, with the shares; empty when met or none
  std::vector<StratumTally> floors;               // each floor's stratum, where the run judged its floors
  std::map<std::string, std::int64_t> classes;    // the edge classes its cases fell in (gen::Coverage)
  // The check, run earlier, whose scores off the oracle this one met again
  // before it could judge its own claim (the gate's: one root cause told
  // once, under the check that owns it); empty otherwise.
  std::string same_mismatch_as;
  // Every judged row's name and a fingerprint of its case: shards of a run
  // can be checked to judge exactly the cases of the whole run.
  std::vector<std::pair<std::string, std::uint64_t>> judged;
  void add(const std::string& row, const Verdict& v, const FailureFile& where);
  void add_error(const std::string& row, const std::string& message);
  bool too_few() const;
  // The verdict's rules: no failing case, no input that could not be judged,
  // at least min_cases judged, every coverage floor met, and run where required.
  bool ok() const;
  // "passed", "FAILED", "not run" or "NOT RUN (required)".
  std::string status() const;
  // One line: the check, its status, cases, worst ratio, seed, and why it stopped or did not run.
  std::string summary() const;
};

struct Report {
  std::vector<Suite> suites;
  std::vector<std::string> absent;  // backends that could not run, with why
  std::vector<std::string> required_absent;  // backends that had to run and could not: a failure
  int interrupted_by = 0;           // the stop signal that ended the run early, 0 when none
  // What the run was (version, command, seed, shard, checks, backend and the
  // drawing's settings): what `merge` holds shards of one campaign to.
  nlohmann::ordered_json run = nlohmann::ordered_json::object();
  bool ok() const;
  std::string table() const;
  // Per suite, its seconds by phase and the harness's own rest (--timings).
  std::string timings() const;
  nlohmann::ordered_json json() const;
};

// What a run's exit status says (the command line's, and gate()'s reading
// of it): wire_format.json states the numbers for both languages.
using ::ctxscore::ExitStatus;
using ::ctxscore::kBadInput;
using ::ctxscore::kFailed;
using ::ctxscore::kInterrupted;
using ::ctxscore::kPassed;
using ::ctxscore::kUnavailable;
// The exit status of a run that reported `r`: interrupted before anything
// else; then a failing case; then an input that could not be judged (bad
// input); then any other way of not passing (a floor, too few cases, a
// required check or backend that did not run).
ExitStatus exit_status(const Report& r);

// A stable hash of text (FNV-1a, 64 bits).
std::uint64_t fnv1a(const std::string& text);
// A stable fingerprint of a case (FNV-1a of its one-line spec).
std::uint64_t fingerprint(const Case& c);

// One testsuite per suite and a testcase per row; or, `per_check`, one
// testcase per suite (the gate: a check is a test, "not run" a skip unless
// required). Throws std::runtime_error when the file cannot be written.
void write_junit(const Report& r, const std::string& path, bool per_check = false);
// A JUnit file for a run that ended in an error before any report (a port
// that did not start, a device that could not be opened, a signal during
// start-up): one error testcase, so that a CI reading the file sees it.
void write_junit_error(const std::string& testcase, const std::string& message, const std::string& path);

// A report read back from its JSON (Report::json's); `source` names it in
// errors. Throws std::invalid_argument naming the field that is missing or
// not what it should be.
Report report_from_json(const nlohmann::json& j, const std::string& source);

// The shard reports of one campaign (each a file name and its JSON) as one
// report: every case of every shard, its failures with their fixtures. Throws
// std::invalid_argument naming the difference when the shards are not one
// campaign's whole set: another seed, version, command, backend, setting,
// check or toolchain; a shard missing or given twice.
Report merge_shards(const std::vector<std::pair<std::string, nlohmann::json>>& shards);

}  // namespace ctxscore::harness

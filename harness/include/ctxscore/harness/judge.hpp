// The harness's one loop: run a backend on a case, judge what it wrote
// against the oracle, and keep a failing case as a replayable fixture.
// Every path (the properties, `ctxscore fuzz`, `fixtures check`, `verify`)
// goes through run_and_judge.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ctxscore/compare.hpp"
#include "ctxscore/fixture.hpp"
#include "ctxscore/harness/backend.hpp"
#include "ctxscore/harness/text.hpp"

namespace ctxscore::harness {

struct JudgeOptions {
  OutMode out = OutMode::given;
  // Write a failing case into failure_dir(). Properties turn this off and
  // write only the shrunk counterexample.
  bool write_failure = true;
  // Make the same call this many times: every call after the first must
  // give the first one's bits (CONTRACT.md §5, repeatability).
  int repeat = 1;
  // Score through a graph, as a serving process does: one recorded on a
  // dummy batch of the case's shapes (one token per request, page 0) at its
  // bound, the case written into the captured buffers, replayed. Out given.
  bool capture = false;
  // Hand the backend the case's call and then, one at a time, that call
  // with one clause of §7 broken (refusals.hpp): each must be refused with
  // every storage unchanged. Out given; nothing is scored against an oracle.
  bool refusals = false;
};

// materialize(c), its time charged to the setup phase (phases.hpp).
HostCase laid_out(const Case& c);

// A fixture a failure was written to (or read from) and the line that judges
// it again; or why none was written. Reports print str() and give the parts
// as data (the JSON report's `fixture`, `replay`, `replay_reproduces`).
struct FailureFile {
  std::string path;         // absolute; empty where none was written
  std::string program;      // the harness binary that judges it again
  std::string flags;        // the backend and how the call is judged (replay_flags)
  bool one_call = false;    // the line judges one call of a claim that takes several, which may pass
  std::string not_written;  // why none was written
  bool empty() const { return path.empty() && not_written.empty(); }
  // PROGRAM fixtures check PATH FLAGS, composed from the fields; "" without a path.
  std::string replay() const;
  // "PATH (replay: LINE)", "PATH (one call again: LINE)", "not written: WHY" or "".
  std::string str() const;
};

// What kind of failure a verdict records beyond its compare report's
// mismatches: data the harness acts on, never read back from the text.
enum class Fault {
  none,             // the compare report decides (mismatch kinds: compare.hpp)
  raised,           // the backend raised, crashed, rejected a valid call or returned something unusable
  hung,             // the backend did not answer in time
  out_of_contract,  // the case itself breaks the contract: no verdict on the backend
  not_repeatable,   // the same call gave other bits
  batch_dependent,  // a request's rows changed with its batch
  shard_mismatch,   // a rank's column is not bitwise its world-1 column
  selection,        // the merged top-k is not the reference's
  replay_differs,   // a graph's replay and a plain call differ
  refusal,          // a call breaking a clause was not refused cleanly, or a valid call was refused
  geometry,         // the launch geometry reported is not the contract's
  untested,         // the case passed without testing what it exists for
  property,         // a property's own claim, neither a call's nor a comparison's, does not hold
};
const char* fault_name(Fault f);
// The fault an exception caught from a backend is: hung or raised.
Fault fault_of(const std::exception& e);

struct Verdict {
  Case spec;
  OutMode out = OutMode::given;
  std::string backend, oracle;
  CompareReport report;
  std::string shape;    // Scored::shape
  Fault fault = Fault::none;
  std::string error;       // what the call's fault was (raised, hung, ...); empty otherwise
  std::string invariance;  // what a claim across calls found (not repeatable, ...); empty otherwise
  // A failure's particulars as fields (the clause, the backend's outcome,
  // the call that differed, the other batch, ...), beside its text.
  std::map<std::string, std::string> details;
  FailureFile fixture;     // where the failing case was written (with its replay line), or why it was not
  bool ok() const { return error.empty() && invariance.empty() && report.ok(); }
  // Records a fault, what it was and its particulars: a claim across calls
  // (not repeatable, batch-dependent, shard mismatch, selection, replay
  // differs) into `invariance`, every other into `error`.
  void fail(Fault f, const std::string& text, const std::map<std::string, std::string>& fields = {});
  std::string str() const;  // one line: verdict, out mode, report or error
};

// The first mismatch of a failing verdict in the request's own terms: its
// length, QL, the token's causal cutoff, the positions the block may see,
// the page the table names for it and the one a call reads. Empty when
// the verdict has no mismatch.
std::string explain_first_mismatch(const Verdict& v);

// Judges what one call returned (`s`, for `host` with out passed as v.out;
// `before` is host.out before the call) against `expected`, into `v`: the
// out allocation or the fresh scores, as the out mode requires.
void judge_scored(Verdict& v, const HostCase& host, const std::vector<float>& before, const Scored& s,
                  const ShardScores& expected);

// Materializes `c`, scores it with the oracle, runs `backend`, compares.
Verdict run_and_judge(Backend& backend, const Case& c, const JudgeOptions& options = {});
// The same on buffers already laid out (`host.out` holds the sentinel);
// `scores` receives what the first call wrote, dense [H, T, L] with NaN
// where the contract writes nothing (empty when the call failed).
Verdict run_and_judge(Backend& backend, HostCase& host, const JudgeOptions& options,
                      std::vector<float>* scores = nullptr);
// The fixture's case, judged against its stored expectation.
Verdict run_and_judge(Backend& backend, const Fixture& f, const JudgeOptions& options = {});

// The flags that select the backend and the options again on a command line
// (the out mode, where not given; the repeat count, where more than one).
std::string replay_flags(const Backend& backend, const JudgeOptions& options);

// The command a replay line starts with: "ctxscore" unless set; the CLI
// sets its own absolute path, so that a line runs as printed whatever PATH holds.
void set_replay_program(const std::string& program);
const std::string& replay_program();
FailureFile with_replay_line(const std::string& path, const std::string& backend_flags, bool one_call = false);

// Where failing cases go: set_failure_dir (the --failures flag), else
// $CTXSCORE_FAILURE_DIR, else ./ctxscore-failures.
std::string failure_dir();
void set_failure_dir(const std::string& dir);
// Why failing cases cannot be written into failure_dir() (made if missing,
// then a file created and removed in it); empty when they can.
std::string failure_dir_problem();
// A failing case's record, one name scheme for every path that writes one:
// `FOUND_BY_seedSEED[_out_MODE][_shrunk].safetensors`.
struct FailureRecord {
  std::string found_by;      // the backend ("hip") or the property ("Kernel/MatchesReferenceOnRandomLayouts")
  std::uint64_t seed = 0;    // the seed that draws the case again (the case's, the run's, or RapidCheck's)
  std::optional<OutMode> out;  // how the failing call passed `out`, where one call failed
  bool shrunk = false;
  std::string toolchain;     // the implementation's (Backend::toolchain), recorded in the fixture
  // The fixture holds one call of a claim that takes several (the same call
  // again, another batch, other ranks): its line judges that call again,
  // which may pass, and is labelled so, not "replay".
  bool one_call = false;
  std::string file_name() const;
};
// Writes `c` into failure_dir() under the record's name; returns its
// absolute path and replay line (`backend_flags` select the backend and
// out mode again), or why it was not written.
FailureFile write_failure_fixture(const Case& c, const FailureRecord& record, const std::string& backend_flags);
// The same for buffers already laid out, whose contents the seed does not give.
FailureFile write_failure_fixture(const HostCase& host, const FailureRecord& record, const std::string& backend_flags);

// Totals over many verdicts: what a property or a fuzz run reports.
struct JudgeStats {
  std::int64_t cases = 0, failures = 0, written = 0, neg_inf = 0;
  std::map<std::string, std::int64_t> shapes;      // by Scored::shape
  std::map<std::string, std::int64_t> out_modes;   // by out mode
  double worst_ratio = 0;
  std::string worst_case;
  // The consumer's view (CompareReport::selection), summed.
  std::int64_t selection_rows = 0, selection_matched = 0, near_ties = 0;
  std::int64_t selection_lower_matched = 0;  // the same rows under the lower-block-first rule
  double worst_margin = 1e300;
  void add(const Verdict& v);
  std::string str() const;  // one line
};

}  // namespace ctxscore::harness

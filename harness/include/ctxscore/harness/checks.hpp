// Every check the harness knows is one record of one registry (CheckDef):
// its name, its claim, its share of the cases, what it needs of a backend
// and how it runs. The CLI's commands, the gate and the GoogleTest callers
// all take checks from the registry, and none holds a check of its own.
// Each check is one file under harness/src/checks/ and one line of
// checks/registry.def; `ctxscore gate --list` names them and their claims.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ctxscore/fixture.hpp"
#include "ctxscore/harness/campaign.hpp"

namespace ctxscore::harness {

// What every drawn check takes.
struct CheckOptions {
  CampaignPlan campaign;
  std::string size;                // a named case size (case_limits.hpp); "": the backend's own
  std::int64_t compile_keys = 0;   // draw from at most this many compile keys; 0: unlimited
  std::string out_mode = "mixed";  // fuzz: given, absent, too_small, or mixed (drawn per case)
  int repeat = 1;                  // fuzz: calls per case, each after the first bitwise the first's
};

// The gate line that draws a case of a run with `o` over `b` again, less its
// check, seed and case (CampaignPlan::redraw): the replay program, the
// backend's flags and every option that changes what is drawn or how it is judged.
std::string redraw_command(const Backend& b, const CheckOptions& o);

// fuzz's coverage floor (campaign.hpp): a stratum of its cases drawn with a
// written element every qualifying score of which is negative, where a max
// that starts at 0 shows (CaseSource::draw_negative_row).
inline const Floor kAllNegativeRowFloor{"a written row whose qualifying scores are all negative", 0.05};
// batch_invariance's: every case in one stratum, a quarter each way the
// batch changes (gen::rebatching_kinds(), gen::genRebatchedCase).
inline constexpr const char* kRebatchedClassPrefix = "the batch ";
// selection's: half its cases drawn so that the reference decides at least
// half their rows (pipeline.hpp's rows_decided), else a wrong selection
// could hide among rows that select every candidate.
inline const Floor kMostRowsDecidedFloor{"a case at least half of whose (head, row) pairs are decided", 0.5};
// The case selection draws for that stratum at a named case size, from a case's seed and RapidCheck size.
Case selection_stratum_case(const std::string& size, std::uint64_t case_seed, int rc_size);

// What a check may need of a backend beyond a plain call, matched against
// the backend's Capabilities.
enum class Need { capture, refusals, geometry };

// What a check runs with.
struct CheckContext {
  CheckOptions drawn;                          // the drawn checks' options, cases already this check's share
  std::vector<std::filesystem::path> corpus;   // corpus, corpus_capture: the fixtures
  std::int64_t geometry_points = 1000;         // geometry: random points beyond its small range
  std::vector<std::string> only;               // large_offsets, large_batches: these named cases alone; empty: all
};

// A check: one record of the registry. The gate, `verify`, `fuzz`, the
// GoogleTest callers and `gate --list` all take checks from it.
struct CheckDef {
  std::string name;
  std::string claim;                  // one line on what it catches (`gate --list`)
  int share_of_cases = 0;             // a drawn check's cases per 20 of fuzz's; 0: it runs its own cases whole
  std::vector<Need> needs;
  std::string oracle;                 // what its suite judges against; empty: the backend's oracle
  bool claims_beyond_scores = false;  // its claim is on bits or selections, not the scores: a mismatch off
                                      // the oracle alone is the root cause of a check before it
  bool left_out_at_small = false;     // a gate at case size small leaves it out unless it is named (memory)
  std::function<Suite(Backend&, const CheckContext&)> run;  // the suite; prints nothing
};

// Every check, in the order the gate runs them (checks/registry.def).
const std::vector<CheckDef>& check_registry();
// Throws std::invalid_argument naming the checks.
const CheckDef& check_named(const std::string& name);
const std::vector<std::string>& check_names();
// Why `def` cannot run on `b`: its first need that `b`'s capabilities lack,
// capture probed where `b` offers it (a raising probe is the check's to
// report); empty when it can run.
std::string unmet_need(const CheckDef& def, Backend& b);
// The suite of a check that did not run on `b`, saying why.
Suite not_run_suite(const CheckDef& def, Backend& b, const std::string& why);
// The check named `name` over `b`: not run where a need is unmet, else its suite.
Suite run_check(const std::string& name, Backend& b, const CheckContext& context);

// Replays `g` over `real` and judges the replay, as a call with out given,
// against the reference's scores of the real batch at `bound`; `replayed`
// receives what the replay wrote.
Verdict judge_replay(CapturedScore& g, Case real, std::int64_t bound, Scored* replayed = nullptr);

struct CorpusOptions {
  std::vector<OutMode> modes = {OutMode::given};
  int repeat = 1;
  bool capture = false;  // through a recorded graph (out given)
  bool refusals = false;  // each fixture's call with one clause of §7 broken at a time (refusals.hpp)
  Say each_call;         // a line per call as it is judged; empty: none
  Say say;               // progress while it runs; empty: none
  std::int64_t min_cases = -1;  // -1: every fixture in every mode
  const TimeBudget* budget = nullptr;
};
// Each fixture in each mode; a fixture that does not read is an error of
// the fixture, told apart from a failing backend.
Suite check_corpus(Backend& b, const std::vector<std::filesystem::path>& files, const CorpusOptions& o);
// The fixture files of `inputs` (files, or folders of .safetensors files);
// throws std::invalid_argument naming an input that does not exist or holds none.
std::vector<std::filesystem::path> fixture_files(const std::vector<std::string>& inputs);

// The names of large_offsets' cases.
const std::vector<std::string>& large_offset_cases();
// Bytes of memory this host has available (MemAvailable).
std::int64_t available_host_bytes();

// The whole gate: each named check in order, the time budget shared so that
// each gets a fair part of what is left.
struct GatePlan {
  std::vector<std::string> checks;     // empty: every check
  std::vector<std::string> required;   // "not run" fails these
  CheckOptions drawn;                  // fuzz's; the other drawn checks take a share of its cases
  std::vector<std::filesystem::path> corpus;
  std::int64_t geometry_points = 1000;
  double time_budget = 0;              // seconds; 0: none
  bool fail_fast = false;              // the checks after the first that fails do not run
  // Checks run side by side, one lane per instance of the backend: the
  // first lane takes run_gate's, each further lane one `another` makes
  // (when it takes its first check). Without `another`, one lane.
  std::size_t lanes = 1;
  std::function<std::unique_ptr<Backend>()> another;
};
Report run_gate(Backend& b, const GatePlan& plan);

}  // namespace ctxscore::harness

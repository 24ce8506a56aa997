// Every check the harness knows, each a function of a backend that returns
// its suite of verdicts: the CLI's commands, the gate and the GoogleTest
// properties all call these, and none holds a check of its own.
//
//   fuzz              random cases against the oracle, every out mode
//   repeatability     the same call three times gives the same bits (§5)
//   batch_invariance  a request's rows do not depend on the rest of its batch (§5)
//   shard_columns     each rank's columns are bitwise the world-1 columns of their blocks (§9)
//   selection         the merged top-16 of every rank is the reference's selection (§9)
//   capture           a graph recorded on a dummy batch at the bound replays every
//                     later batch correctly, and bitwise as a plain call
//   refusals          a call that breaks one clause of §7 is refused, nothing written
//   corpus            every fixture, out given, absent and too small
//   corpus_capture    every fixture through a recorded graph
//   geometry          the launch geometry a port reports against §6
//   large_offsets     a cache past 2^31 elements, out strides past 2^31 elements,
//                     a query row past 2^31 bytes
//   large_batches     request ids past 2^15 and 2^16 (the registry's batch family)
// Each file under harness/src/checks/ holds one.
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

// The checks in the order the gate runs them.
const std::vector<std::string>& check_names();
// One line on what a check catches, for `ctxscore gate --list`.
std::string check_claim(const std::string& name);

Suite check_fuzz(Backend& b, const CheckOptions& o);
Suite check_repeatability(Backend& b, const CheckOptions& o);
Suite check_batch_invariance(Backend& b, const CheckOptions& o);
Suite check_shard_columns(Backend& b, const CheckOptions& o);
Suite check_selection(Backend& b, const CheckOptions& o);
Suite check_capture(Backend& b, const CheckOptions& o);
Suite check_refusals(Backend& b, const CheckOptions& o);

// Why `b` cannot record a graph here (a one-token probe returned none);
// empty when it can. A probe that raises throws BackendError naming it.
std::string capture_absence(Backend& b);
// Replays `g` over `real` and judges the replay, as a call with out given,
// against the reference's scores of the real batch at `bound`; `replayed`
// receives what the replay wrote.
Verdict judge_replay(CapturedScore& g, Case real, std::int64_t bound, Scored* replayed = nullptr);

struct CorpusOptions {
  std::vector<OutMode> modes = {OutMode::given};
  int repeat = 1;
  bool capture = false;  // through a recorded graph (out given)
  bool refusals = false;  // each fixture's call with one clause of §7 broken at a time (refusals.hpp)
  bool print = false;    // a line per call on stdout
  std::int64_t min_cases = -1;  // -1: every fixture in every mode
  const TimeBudget* budget = nullptr;
};
// Each fixture in each mode; a fixture that does not read is an error of
// the fixture, told apart from a failing backend.
Suite check_corpus(Backend& b, const std::vector<std::filesystem::path>& files, const CorpusOptions& o);
// The fixture files of `inputs` (files, or folders of .safetensors files);
// throws std::invalid_argument naming an input that does not exist or holds none.
std::vector<std::filesystem::path> fixture_files(const std::vector<std::string>& inputs);

// A port that answers `geometry`, against §6's formula: every point of a
// small range, then `random_points` random ones up to 2^20 requests and blocks.
Suite check_geometry(Backend& b, std::int64_t random_points, std::uint64_t seed);

// The cases whose offsets pass 2^31, each judged where this host has the
// memory its buffers need (three copies: the harness's, the call's, the
// reply), else listed in not_run. `only`: those of these names.
Suite check_large_offsets(Backend& b, const std::vector<std::string>& only = {}, const TimeBudget* budget = nullptr);
const std::vector<std::string>& large_offset_cases();
// The registry's batch family, or the named ones of it.
Suite check_large_batches(Backend& b, const std::vector<std::string>& only = {}, const TimeBudget* budget = nullptr);
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

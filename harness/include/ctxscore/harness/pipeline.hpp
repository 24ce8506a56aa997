// The consumer's view of a backend (CONTRACT.md §9): the same case scored at
// world 1 and at every rank of its world. Each rank's written column j must
// equal, bitwise, the world-1 column of block j·world + r (else the merge is
// not exact), and the merged top-k of the ranks' scores must select what the
// reference selects, near-ties exempt, under both tie rules.
#pragma once

#include <string>
#include <vector>

#include "ctxscore/harness/backend.hpp"
#include "ctxscore/harness/judge.hpp"
#include "ctxscore/selection.hpp"

namespace ctxscore::harness {

struct PipelineVerdict {
  Case spec;
  std::string error;           // a backend raised or returned something unusable
  Fault error_fault = Fault::none;  // raised or hung, where `error` says what
  std::string shard_mismatch;  // the first column that is not bitwise its world-1 column
  std::int64_t columns = 0;    // written (rank, row, slot) columns compared, all heads each
  SelectionCheck higher, lower;  // the merged selection under each tie rule
  bool ok() const { return error.empty() && shard_mismatch.empty() && higher.ok() && lower.ok(); }
  std::string str() const;
};

// `out_modes[r]` is how rank r's call passes out (the world-1 call gets the
// case's own out). `params.tie` is ignored: both rules are judged.
PipelineVerdict judge_pipeline(Backend& b, const Case& c, const std::vector<OutMode>& out_modes,
                               const SelectionParams& params = {});

// The (head, row) pairs of case `c` merged at world 1, and those whose
// selection the reference decides: a (k+1)-th candidate beyond the bounds
// of the k-th (not a near-tie, not a row of k candidates or fewer).
struct RowsDecided {
  std::int64_t rows = 0, decided = 0;
  bool most() const { return 2 * decided >= rows && rows > 0; }
};
RowsDecided rows_decided(const Case& c, const SelectionParams& params = {});

}  // namespace ctxscore::harness

// Validation of the operator's arguments: every clause of the contract's
// "Validation" section, each with its own error naming the argument, the
// value seen and what was expected. Nothing is launched or written on error.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "ctxscore/contract.hpp"
#include "ctxscore/tensor.hpp"

namespace ctxscore {

// Which clause failed: tests assert on it, messages explain it.
enum class Clause {
  query_layout, query_dtype, query_dim_stride,
  cache_layout, cache_dtype, cache_contiguous, cache_empty,
  table_layout, table_dtype, table_column_stride,
  lengths_layout, lengths_dtype, lengths_contiguous,
  same_device,
  world, rank, max_seq_len, max_query_len, heads,
  tokens_vs_batch, table_rows, table_width,
  out_shape, out_in_capture, geometry_override,
};
const char* clause_name(Clause c);

class ContractError : public std::invalid_argument {
 public:
  ContractError(Clause clause, const std::string& message)
      : std::invalid_argument(message), clause_(clause) {}
  Clause clause() const { return clause_; }

 private:
  Clause clause_;
};

struct ScoreArgs {
  TensorRef idx_q;        // bf16 [T, H, 128]
  TensorRef index_cache;  // bf16 [P, 128, 128]
  TensorRef block_table;  // int32 [B, Wt]
  TensorRef seq_lens;     // int32 [B]
  std::int64_t max_seq_len = 0;
  std::int64_t rank = 0;
  std::int64_t world = 1;
  std::int64_t max_query_len = 1;
  double sm_scale = 1.0;
  std::optional<TensorRef> out;  // fp32 [H, >=T, >=L], any strides
};

// What validation derives: the sizes and the production geometry.
struct Layout {
  std::int64_t tokens = 0, heads = 0, batch = 0, pages = 0, table_width = 0;
  Geometry geometry;
};

// The once-per-layout clauses (upstream's check_context_score_inputs).
void check_layout(const ScoreArgs& args);
// The per-call clauses; returns the derived layout. Does not look at `out`.
Layout check_call(const ScoreArgs& args);
// Both, in that order.
Layout validate(const ScoreArgs& args);

// Whether `out` fits [H, >=T, >=L] fp32 on the queries' device.
bool out_fits(const ScoreArgs& args, const Layout& layout);
std::string out_requirement(const ScoreArgs& args, const Layout& layout);

// What a launcher does with `out`: write into it, or score into a fresh
// buffer (upstream's behaviour outside capture, reported, never silent).
// While capturing, a given `out` that does not fit is a ContractError.
struct OutDecision {
  bool use_given = false;
  std::string fresh_reason;  // why a fresh buffer is needed, when it is
};
OutDecision decide_out(const ScoreArgs& args, const Layout& layout, bool capturing);

// An explicit geometry for tests: any CHUNK >= 1 and a grid covering the slots.
// `teams` (a kernel's own split of a program into thread teams) and
// `ring_pages` (the pages each team streams ahead) change who scores a slot
// and when, never what is scored; 0 leaves either to the kernel.
struct GeometryOverride {
  std::int64_t chunk = 0;
  std::int64_t grid_y = 0;
  std::int64_t teams = 0;
  std::int64_t ring_pages = 0;
};
Geometry apply_override(const Geometry& production, const GeometryOverride& o);

}  // namespace ctxscore

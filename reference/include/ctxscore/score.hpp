// The CPU reference of the round-robin shard scoring: exact sums (fp64),
// exactly the contract's slots written, and the contract's tolerance bound
// for every written element.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ctxscore/validate.hpp"
#include "ctxscore/views.hpp"

namespace ctxscore {

struct ShardScores {
  std::int64_t heads = 0, tokens = 0, slots = 0;  // dense [H, T, L]
  std::int64_t batch = 0, query_len = 1, rank = 0, world = 1, global = 0;
  std::vector<std::int32_t> lens;  // [B]: what the consumer's selection needs beside the scores
  float scale = 0.0f;  // SCALE
  // SCALE · max Σ_d k·q over qualifying positions, computed exactly; −inf
  // where none qualifies. Meaningful only where written.
  std::vector<double> exact;
  // |SCALE|·128·2^-23·max Σ|k·q| + one fp32 ulp of the result.
  std::vector<double> bound;
  std::vector<std::uint8_t> written;  // [T, L]: 1 where the contract writes
  std::vector<std::int64_t> page;     // [B, L]: clamped page of each written slot, −1 elsewhere
  // Set when the inputs leave the contract's numeric model (NaN, ±inf,
  // products that overflow or underflow fp32): such a case is not compared.
  std::optional<std::string> out_of_contract;

  std::int64_t index(std::int64_t h, std::int64_t t, std::int64_t j) const {
    return (h * tokens + t) * slots + j;
  }
  bool is_written(std::int64_t t, std::int64_t j) const { return written[t * slots + j] != 0; }
};

// A shard's shape and call parameters, no scores yet ([H, B·QL, L] with
// L = ceil(G / world)): where every scorer, and a fixture's stored
// expectation, starts.
ShardScores empty_shard(std::int64_t heads, std::int64_t query_len, std::int64_t rank, std::int64_t world,
                        std::int64_t global, std::vector<std::int32_t> lens, double sm_scale);

// Validates, scores every written slot and, when args.out is given, writes
// the fp32 scores through it (it must fit [H, >=T, >=L]). Nothing else of
// out is touched.
ShardScores score_shard(const ScoreArgs& args);

// The fp32 value the reference stores for an exact score.
float stored_value(double exact);

// The contract's bound on |kernel − exact| for one written element:
// |SCALE|·128·2^-23·(max Σ|k·q| over the qualifying positions) plus one fp32
// ulp of the stored result; 0 for −inf.
double tolerance_bound(float scale, double max_abs_sum, double exact);

// The same contract as score_shard, written as plain loops with no shared
// scoring code: the oracle the reference itself is fuzzed against, and the
// benchmark's baseline. Writes through args.out like score_shard.
ShardScores score_shard_naive(const ScoreArgs& args);

}  // namespace ctxscore

// Compile keys: upstream's Triton kernel takes (HEADS, QUERY_LEN, RANK,
// WORLD, CHUNK, N, SCALE) as compile-time constants, so every distinct set
// a run draws costs a port one JIT compile. A CaseSource can hold a fuzz
// run to a few such keys: cases still vary in lengths, tables, pages,
// strides, out layouts and contents, and shrinking stays inside the keys.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "ctxscore/harness/generators.hpp"

namespace ctxscore::harness {

struct CompileKey {
  std::int64_t heads = 0, query_len = 0, world = 0, rank = 0, chunk = 0, tile_n = 0;
  double sm_scale = 0;
  auto tied() const { return std::tie(heads, query_len, world, rank, chunk, tile_n, sm_scale); }
  bool operator==(const CompileKey& o) const { return tied() == o.tied(); }
  bool operator<(const CompileKey& o) const { return tied() < o.tied(); }
  std::string str() const;  // "H=4 QL=1 world=4 rank=1 CHUNK=4 N=16 sm_scale=0.0884"
};

// The key a call of `c` compiles: §6's CHUNK (or the forced one) and tile N.
CompileKey compile_key(const Case& c);

// The cases of one fuzz run: case k is draw(seed + k). With max_keys > 0,
// the run first draws max_keys keys from its seed alone (so every shard of
// a run draws the same ones), then each case inside one of them.
class CaseSource {
 public:
  CaseSource(const gen::CaseLimits& lim, std::uint64_t run_seed, std::int64_t max_keys);
  rc::Shrinkable<Case> draw(std::uint64_t case_seed) const;
  // Whether a shrink candidate stays inside the run's keys (always, unlimited).
  bool admits(const Case& c) const;
  const std::vector<CompileKey>& keys() const { return keys_; }
  bool limited() const { return !keys_.empty(); }

 private:
  gen::CaseLimits lim_;
  std::vector<CompileKey> keys_;                // distinct, sorted
  std::vector<rc::Shrinkable<Case>> prototypes_;  // one case of each key, the fallback draw
};

}  // namespace ctxscore::harness

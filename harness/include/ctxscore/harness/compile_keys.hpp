// Compile keys: upstream's Triton kernel takes (HEADS, QUERY_LEN, RANK,
// WORLD, CHUNK, N, SCALE) as compile-time constants, and a JIT compiler
// specializes on the call's integer arguments as well (Triton on whether
// each is 1 or a multiple of 16), so every distinct key a run draws costs a
// port a compile. A CaseSource can hold a fuzz run to a few keys, each one
// case's constant set and call shape (B, S, pages, table and query strides,
// out's layout); the cases of a key differ in their lengths, page tables
// (out-of-range ids included) and contents, and shrinking stays inside the
// keys.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ctxscore/harness/generators.hpp"

namespace ctxscore::harness {

struct CompileKey {
  std::int64_t heads = 0, query_len = 0, world = 0, rank = 0, chunk = 0, tile_n = 0;
  double sm_scale = 0;
  std::string call_shape;  // every integer the call passes besides the constants: shapes and strides
  auto tied() const { return std::tie(heads, query_len, world, rank, chunk, tile_n, sm_scale, call_shape); }
  bool operator==(const CompileKey& o) const { return tied() == o.tied(); }
  bool operator<(const CompileKey& o) const { return tied() < o.tied(); }
  std::string str() const;  // "H=4 QL=1 world=4 rank=1 CHUNK=4 N=16 sm_scale=0.0884 | B=2 S=4096 ..."
};

// The key a call of `c` compiles: §6's CHUNK (or the forced one), tile N, and its call shape.
CompileKey compile_key(const Case& c);

// The cases of one fuzz run: case k is draw(seed + k). With max_keys > 0,
// the run first draws max_keys prototype cases from its seed alone (so
// every shard of a run draws the same keys), then each case from one of
// them: its lengths, page table and contents drawn anew.
class CaseSource {
 public:
  CaseSource(const gen::CaseLimits& lim, std::uint64_t run_seed, std::int64_t max_keys);
  // `size`: RapidCheck's, 0 to 100 (the generators' ranges grow with it).
  rc::Shrinkable<Case> draw(std::uint64_t case_seed, int size = 100) const;
  // A case of the run with a written element every qualifying score of
  // which is negative (where a max started at 0 shows): one request's last
  // token sees one position of its rank's first block, and the contents are
  // drawn until a head scores that position below zero. nullopt where no
  // key of the run writes anything (its rank owns no block under its bound).
  std::optional<rc::Shrinkable<Case>> draw_negative_row(std::uint64_t case_seed, int size = 100) const;
  // Whether a shrink candidate stays inside the run's keys (always, unlimited).
  bool admits(const Case& c) const;
  const std::vector<CompileKey>& keys() const { return keys_; }
  const std::vector<Case>& prototypes() const { return prototypes_; }  // one case of each key, in keys()' order
  bool limited() const { return !keys_.empty(); }

 private:
  rc::Shrinkable<Case> draw_from_key(std::size_t j, std::uint64_t case_seed, int size) const;

  gen::CaseLimits lim_;
  std::vector<CompileKey> keys_;  // distinct
  std::vector<Case> prototypes_;  // one case of each key
};

}  // namespace ctxscore::harness

// How large a generated case may get, by name: one table that the
// generators, `fixtures generate --class`, `fuzz --case-size`, `verify` and
// the backends all read. Plain data, no RapidCheck.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ctxscore::gen {

struct CaseLimits {
  std::int64_t max_batch = 6;
  std::int64_t min_heads = 1;
  std::int64_t max_heads = 4;
  std::int64_t min_query_len = 1;
  std::int64_t max_query_len = 4;
  std::int64_t min_world = 1;
  std::int64_t max_world = 8;
  std::int64_t fixed_rank = -1;  // >= 0: every case at this rank (clamped below world)
  std::int64_t max_bound = 4096;
  std::int64_t max_pages = 12;
  bool strided_layouts = true;   // padded query/table strides, larger permuted `out`
  bool forced_geometry = false;  // explicit chunkings (kernel-side only)
  // Forced kernel shapes drawn up to these (the kernel's max_teams() and
  // max_ring_pages(); a program holds teams × ring pages <= max_teams).
  std::int64_t max_teams = 4;
  std::int64_t max_ring_pages = 2;
  // Keeps the reference's work and the out buffer in budget: at most this
  // many (row, block) pairs reached, this many elements of out.
  std::int64_t max_work = std::int64_t{1} << 14;
  std::int64_t max_out_elems = std::int64_t{1} << 20;
};

// The named sizes, none with forced chunkings (a backend that takes them
// turns them on):
//   small  the CPU suite's tiny cases (a slow port's)
//   large  the GPU suite's: M3's layout ranges and past them, with a budget
//          that keeps the reference in pace
//   m3     M3's shapes at the GPU suite's sizes: H 4, world 4, QL 1 to 4
const std::vector<std::string>& limit_names();
// Throws std::invalid_argument naming the known sizes.
CaseLimits named_limits(const std::string& name);

// The GPU suite's limits for the project's kernel: `large`, with forced
// chunkings and kernel shapes up to the kernel's max_teams() and max_ring_pages().
CaseLimits kernel_limits(std::int64_t max_teams, std::int64_t max_ring_pages);

}  // namespace ctxscore::gen

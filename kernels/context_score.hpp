// The HIP port of the context-parallel score operator: launcher API.
#pragma once

#include <optional>
#include <string>

#include "ctxscore/validate.hpp"
#include "platform.hpp"

namespace ctxscore {

// A device buffer the launcher allocated (outside capture, when `out` was
// missing or did not fit). Owned by the result; freed with it.
struct DeviceScores {
  float* data = nullptr;
  std::int64_t heads = 0, tokens = 0, slots = 0;  // packed [H, T, L]
  DeviceScores() = default;
  DeviceScores(const DeviceScores&) = delete;
  DeviceScores& operator=(const DeviceScores&) = delete;
  DeviceScores(DeviceScores&& o) noexcept;
  DeviceScores& operator=(DeviceScores&& o) noexcept;
  ~DeviceScores();
};

struct LaunchResult {
  Geometry geometry;          // what was launched (the launcher's chunking or the override)
  int teams = 0;              // thread teams per program (page_stream.hpp)
  int ring_pages = 0;         // pages in each team's ring
  int live_rows = 0;          // query rows the score step reads per m-tile: 4, 8 or 16 (address_plan.hpp)
  int threads = 0;            // threads per program: teams × 256
  bool launched = false;      // false only when T = 0
  bool used_given_out = false;
  std::string fresh_reason;   // why `fresh` was allocated, when it was
  DeviceScores fresh;
};

// Validates with the reference's validator, sizes the launch from the shared
// contract header, refined by choose_chunking (or `geometry`, for tests),
// and launches on `stream`.
// Every tensor must be on the GPU. Errors are ContractError (bad arguments)
// or std::runtime_error (a failing HIP call), before anything is written.
LaunchResult indexer_context_scores(const ScoreArgs& args, hipStream_t stream,
                                    const std::optional<GeometryOverride>& geometry = std::nullopt);

// Largest H·QL one program can hold (its query tile lives in shared memory).
std::int64_t max_tile_rows();

// Most thread teams one program may have on this platform, and most pages
// in a team's ring (a program holds teams × ring pages <= max_teams()).
int max_teams();
int max_ring_pages();

// The compiler that built the kernel, and the runtime, driver and device it
// runs on.
std::string kernel_toolchain();

}  // namespace ctxscore

// geometry: the launch geometry a port reports (its `geometry` answer)
// against §6's formula: every point of a small range (batch 1..48, G 1..96
// blocks, world 1..5, H·QL 1..20), then random points up to 2^20 requests
// and blocks.
#include <chrono>
#include <random>

#include "ctxscore/harness/checks.hpp"
#include "ctxscore/harness/port.hpp"

namespace ctxscore::harness {

namespace {

constexpr const char* kOracle = "CONTRACT.md section 6";

Suite run(Backend& b, const CheckContext& x) {
  const std::int64_t random_points = x.geometry_points;
  const std::uint64_t seed = x.drawn.campaign.seed;
  Suite s = suite_for("geometry", b, kOracle);
  s.seed = std::to_string(seed);
  PortBackendApi* port = as_port(b);
  if (!port) throw std::logic_error("geometry runs on a backend that answers `geometry` (its capabilities say so)");
  const auto t0 = std::chrono::steady_clock::now();
  const auto judge_point = [&](std::int64_t batch, std::int64_t bound, std::int64_t world, std::int64_t heads,
                               std::int64_t ql) {
    const Geometry want = launch_geometry(batch, bound, world, heads, ql);
    std::string row = "B=" + std::to_string(batch) + " S=" + std::to_string(bound) + " world=" + std::to_string(world) +
                      " H=" + std::to_string(heads) + " QL=" + std::to_string(ql);
    Verdict v;
    v.backend = b.name();
    v.oracle = s.oracle;
    try {
      const PortGeometry got = port->geometry(batch, bound, world, heads, ql);
      if (got.chunk_count != want.chunks || got.chunk != want.chunk || got.grid_x != want.grid_x || got.grid_y != want.grid_y)
        v.fail(Fault::geometry, "launches chunk count " + std::to_string(got.chunk_count) + ", CHUNK " + std::to_string(got.chunk) +
                  ", grid " + std::to_string(got.grid_x) + "x" + std::to_string(got.grid_y) + "; the contract gives " +
                  std::to_string(want.chunks) + ", " + std::to_string(want.chunk) + ", " + std::to_string(want.grid_x) +
                  "x" + std::to_string(want.grid_y) + " (" + row + ")",
               {{"launched", std::to_string(got.chunk_count) + " chunks of " + std::to_string(got.chunk) + ", grid " +
                                 std::to_string(got.grid_x) + "x" + std::to_string(got.grid_y)},
                {"contract", std::to_string(want.chunks) + " chunks of " + std::to_string(want.chunk) + ", grid " +
                                 std::to_string(want.grid_x) + "x" + std::to_string(want.grid_y)}});
    } catch (const std::exception& e) {
      v.fail(fault_of(e), e.what());
    }
    s.add(row, v, {});
    return v.ok();
  };
  for (std::int64_t batch = 1; batch <= 48; ++batch)
    for (std::int64_t g = 1; g <= 96; g += (g < 16 ? 1 : 5))
      for (std::int64_t world = 1; world <= 5; ++world)
        judge_point(batch, g * 128 - (batch % 3 == 0 ? 5 : 0), world, 1 + batch % 5, 1 + g % 4);
  std::mt19937_64 rng(seed);
  for (std::int64_t k = 0; k < random_points; ++k) {
    const std::int64_t batch = 1 + static_cast<std::int64_t>(rng() % (1u << 20));
    const std::int64_t bound = 1 + static_cast<std::int64_t>(rng() % (std::uint64_t{1} << 27));
    const std::int64_t world = 1 + static_cast<std::int64_t>(rng() % 16);
    judge_point(batch, bound, world, 1 + static_cast<std::int64_t>(rng() % 16), 1 + static_cast<std::int64_t>(rng() % 8));
  }
  s.min_cases = static_cast<std::int64_t>(s.rows.size());
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace

CheckDef geometry_check() {
  return {"geometry", "the launch geometry the port reports is the contract's", 0, {Need::geometry}, kOracle, false, false,
          run};
}

}  // namespace ctxscore::harness

// Plain loops over (request, slot, token, head, position, d): no GEMM, no
// stacking, no shared scoring code with score.cpp. Slow on purpose; the
// reference is judged against it.
#include <cmath>
#include <limits>

#include "ctxscore/score.hpp"

namespace ctxscore {

ShardScores score_shard_naive(const ScoreArgs& args) {
  const Layout layout = validate(args);
  if (args.out && !out_fits(args, layout))
    throw ContractError(Clause::out_shape, "out: " + out_requirement(args, layout));
  const InputViews in = views_of(args);
  const Geometry& g = layout.geometry;
  ShardScores s = empty_shard(layout.heads, args.max_query_len, args.rank, args.world, g.global,
                              std::vector<std::int32_t>(in.lens.data, in.lens.data + in.lens.batch), args.sm_scale);
  s.exact.assign(static_cast<std::size_t>(s.heads * s.tokens * s.slots), std::numeric_limits<double>::quiet_NaN());
  s.bound.assign(s.exact.size(), 0.0);
  s.written.assign(static_cast<std::size_t>(s.tokens * s.slots), 0);
  s.page.assign(static_cast<std::size_t>(s.batch * s.slots), -1);
  const double scale = s.scale;

#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (std::int64_t i = 0; i < s.batch; ++i)
    for (std::int64_t j = 0; j < s.slots; ++j) {
      const std::int64_t len = in.lens.at(i);
      if (j >= scan_slots(len, g.global, s.slots, args.rank, args.world)) continue;
      const std::int64_t b = block_of_slot(j, args.rank, args.world);
      const std::int64_t p = clamp_page(in.table.at(i, b), layout.pages);
      const bf16* page = in.cache.page(p);
      s.page[static_cast<std::size_t>(i * s.slots + j)] = p;
      for (std::int64_t t = 0; t < s.query_len; ++t) {
        const std::int64_t row = i * s.query_len + t;
        const std::int64_t cutoff = causal_cutoff(len, s.query_len, t);
        for (std::int64_t h = 0; h < s.heads; ++h) {
          const bf16* q = in.q.row(row, h);
          double best = -std::numeric_limits<double>::infinity(), best_abs = 0.0;
          for (std::int64_t pos = 0; pos < kBlockTokens && position_qualifies(b, pos, cutoff); ++pos) {
            double dot = 0.0, abs_dot = 0.0;
            for (std::int64_t d = 0; d < kHeadDim; ++d) {
              const double prod = static_cast<double>(static_cast<float>(page[pos * kHeadDim + d])) *
                                  static_cast<double>(static_cast<float>(q[d]));
              dot += prod;
              abs_dot += std::fabs(prod);
            }
            best = std::fmax(best, scale * dot);
            best_abs = std::fmax(best_abs, abs_dot);
          }
          const std::size_t e = static_cast<std::size_t>(s.index(h, row, j));
          s.exact[e] = best;
          s.bound[e] = tolerance_bound(s.scale, best_abs, best);
          if (args.out) scores_view_of(*args.out).at(h, row, j) = stored_value(best);
        }
        s.written[static_cast<std::size_t>(row * s.slots + j)] = 1;
      }
    }
  return s;
}

}  // namespace ctxscore

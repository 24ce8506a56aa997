#include "ctxscore/score.hpp"

#include <cfloat>
#include <cmath>
#include <limits>
#include <sstream>

namespace ctxscore {

namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// 128 fp32 additions, each erring by at most 2^-23 relative.
constexpr double kSumErr = 128.0 / 8388608.0;

double ulp_of(float v) {
  const float a = std::fabs(v);
  return static_cast<double>(std::nextafter(a, std::numeric_limits<float>::infinity())) - a;
}

// Scans one bf16 row set for values outside the numeric model; returns the
// smallest nonzero magnitude (for the underflow check).
bool finite_min(const bf16* p, std::int64_t n, double& min_nonzero) {
  for (std::int64_t k = 0; k < n; ++k) {
    const double v = static_cast<double>(static_cast<float>(p[k]));
    if (!std::isfinite(v)) return false;
    const double a = std::fabs(v);
    if (a != 0.0 && a < min_nonzero) min_nonzero = a;
  }
  return true;
}

struct Work {
  std::int64_t request;
  std::int64_t slot;
};

}  // namespace

float stored_value(double exact) { return static_cast<float>(exact); }

ShardScores score_shard(const ScoreArgs& args) {
  const Layout layout = validate(args);
  const Geometry& g = layout.geometry;
  if (args.out && !out_fits(args, layout))
    throw ContractError(Clause::out_shape, "out: " + out_requirement(args, layout));
  const InputViews in = views_of(args);
  const std::int64_t H = layout.heads, QL = args.max_query_len, T = layout.tokens, L = g.local;
  const std::int64_t B = layout.batch, R = H * QL;

  ShardScores s;
  s.heads = H;
  s.tokens = T;
  s.slots = L;
  s.batch = B;
  s.query_len = QL;
  s.rank = args.rank;
  s.world = args.world;
  s.scale = scale_fp32(args.sm_scale);
  s.exact.assign(static_cast<std::size_t>(H * T * L), std::numeric_limits<double>::quiet_NaN());
  s.bound.assign(s.exact.size(), 0.0);
  s.written.assign(static_cast<std::size_t>(T * L), 0);
  s.page.assign(static_cast<std::size_t>(B * L), -1);
  if (!std::isfinite(s.scale)) s.out_of_contract = "SCALE = fp32(sm_scale * log2e) is not finite";

  // Queries as fp64 tile rows n = t·H + h, per request; bf16 → fp64 is exact.
  RowMatrix q(T * H, kHeadDim);
  double q_min = std::numeric_limits<double>::infinity();
  for (std::int64_t row = 0; row < T; ++row)
    for (std::int64_t h = 0; h < H; ++h) {
      const bf16* src = in.q.row(row, h);
      if (!finite_min(src, kHeadDim, q_min) && !s.out_of_contract) {
        std::ostringstream m;
        m << "idx_q holds a non-finite value at token " << row << " head " << h;
        s.out_of_contract = m.str();
      }
      for (std::int64_t d = 0; d < kHeadDim; ++d) q(row * H + h, d) = static_cast<float>(src[d]);
    }
  const RowMatrix q_abs = q.cwiseAbs();

  std::vector<Work> work;
  for (std::int64_t i = 0; i < B; ++i) {
    const std::int64_t scan = scan_slots(in.lens.at(i), g.global, L, args.rank, args.world);
    for (std::int64_t j = 0; j < scan; ++j) work.push_back({i, j});
  }

  std::string page_problem;
  const double scale = s.scale, abs_scale = std::fabs(scale);
  const double overflow_limit = static_cast<double>(FLT_MAX) / std::fmax(1.0, abs_scale);
#pragma omp parallel
  {
    RowMatrix k(kBlockTokens, kHeadDim), k_abs(kBlockTokens, kHeadDim);
    RowMatrix dots(R, kBlockTokens), mags(R, kBlockTokens);
    std::int64_t loaded_page = -1;
    double k_min = std::numeric_limits<double>::infinity();
    bool k_finite = true;
#pragma omp for schedule(dynamic, 4)
    for (std::size_t w = 0; w < work.size(); ++w) {
      const std::int64_t i = work[w].request, j = work[w].slot;
      const std::int64_t len = in.lens.at(i);
      const std::int64_t b = block_of_slot(j, args.rank, args.world);
      const std::int64_t p = clamp_page(in.table.at(i, b), layout.pages);
      if (p != loaded_page) {
        const bf16* src = in.cache.page(p);
        k_min = std::numeric_limits<double>::infinity();
        k_finite = finite_min(src, kPageElems, k_min);
        for (std::int64_t e = 0; e < kPageElems; ++e) k.data()[e] = static_cast<float>(src[e]);
        k_abs = k.cwiseAbs();
        loaded_page = p;
      }
      const auto qi = q.middleRows(i * R, R);
      dots.noalias() = qi * k.transpose();
      mags.noalias() = q_abs.middleRows(i * R, R) * k_abs.transpose();

      bool overflow = false;
      for (std::int64_t n = 0; n < R; ++n) {
        const std::int64_t t = tile_token(n, H), h = tile_head(n, H);
        const std::int64_t row = i * QL + t;
        const std::int64_t cutoff = causal_cutoff(len, QL, t);
        double best = kNegInf, best_mag = 0.0;
        for (std::int64_t pos = 0; pos < kBlockTokens; ++pos) {
          if (!position_qualifies(b, pos, cutoff)) break;  // positions qualify as a prefix
          best = std::fmax(best, scale * dots(n, pos));
          best_mag = std::fmax(best_mag, mags(n, pos));
        }
        for (std::int64_t pos = 0; pos < kBlockTokens; ++pos)
          overflow = overflow || mags(n, pos) > overflow_limit;
        const std::size_t e = static_cast<std::size_t>(s.index(h, row, j));
        s.exact[e] = best;
        s.bound[e] = best == kNegInf ? 0.0 : abs_scale * kSumErr * best_mag + ulp_of(stored_value(best));
        if (args.out) scores_view_of(*args.out).at(h, row, j) = stored_value(best);
        s.written[static_cast<std::size_t>(row * L + j)] = 1;
      }
      s.page[static_cast<std::size_t>(i * L + j)] = p;
      const bool underflow = k_min * q_min < static_cast<double>(FLT_MIN);
      if (!k_finite || overflow || underflow) {
        std::ostringstream m;
        m << "index_cache page " << p << " (request " << i << ", slot " << j << ") "
          << (!k_finite ? "holds a non-finite value"
                        : overflow ? "gives products or sums that overflow fp32"
                                   : "gives nonzero products below fp32's normal range");
#pragma omp critical(ctxscore_out_of_contract)
        if (page_problem.empty()) page_problem = m.str();
      }
    }
  }
  if (!s.out_of_contract && !page_problem.empty()) s.out_of_contract = page_problem;
  return s;
}

}  // namespace ctxscore

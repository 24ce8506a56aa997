#include "ctxscore/score.hpp"

#include <algorithm>
#include <cfloat>
#include <cstring>
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

double bits_to_double(std::uint32_t bf16_bits) {
  const std::uint32_t u = bf16_bits << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Widens one page to fp64 K and |K| (exact) in a loop the compiler
// vectorises, noting non-finite values and the smallest nonzero magnitude.
struct PageScan {
  bool finite;
  double min_nonzero;
};
PageScan widen_page(const bf16* src, double* k, double* k_abs) {
  std::uint32_t bad = 0, min_bits = 0x7fffu;
  for (std::int64_t e = 0; e < kPageElems; ++e) {
    const std::uint32_t b = src[e].value;
    const std::uint32_t a = b & 0x7fffu;
    bad |= static_cast<std::uint32_t>((a & 0x7f80u) == 0x7f80u);
    min_bits = std::min(min_bits, a == 0 ? 0x7fffu : a);
    k[e] = bits_to_double(b);
    k_abs[e] = bits_to_double(a);
  }
  return {bad == 0, min_bits == 0x7fffu ? std::numeric_limits<double>::infinity() : bits_to_double(min_bits)};
}

// Up to this many slots of one request form one work item: their pages
// stacked make one (slots·128)×128 by 128×N product, large enough for
// Eigen's GEMM to run near the FMA peak.
constexpr std::int64_t kSlotsPerItem = 2;

struct Work {
  std::int64_t request, first_slot, slots;
};

}  // namespace

float stored_value(double exact) { return static_cast<float>(exact); }

double tolerance_bound(float scale, double max_abs_sum, double exact) {
  if (exact == kNegInf) return 0.0;
  return std::fabs(static_cast<double>(scale)) * kSumErr * max_abs_sum + ulp_of(stored_value(exact));
}

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
    for (std::int64_t j = 0; j < scan; j += kSlotsPerItem)
      work.push_back({i, j, std::min(kSlotsPerItem, scan - j)});
  }

  std::string page_problem;
  const double scale = s.scale, abs_scale = std::fabs(scale);
  const double overflow_limit = static_cast<double>(FLT_MAX) / std::fmax(1.0, abs_scale);
  const std::optional<ScoresView> out =
      args.out ? std::optional<ScoresView>(scores_view_of(*args.out)) : std::nullopt;
#pragma omp parallel
  {
    RowMatrix k(kSlotsPerItem * kBlockTokens, kHeadDim), k_abs(kSlotsPerItem * kBlockTokens, kHeadDim);
    RowMatrix dots(R, kSlotsPerItem * kBlockTokens), mags(R, kSlotsPerItem * kBlockTokens);
#pragma omp for schedule(dynamic, 1)
    for (std::size_t w = 0; w < work.size(); ++w) {
      const std::int64_t i = work[w].request, len = in.lens.at(i);
      const std::int64_t rows = work[w].slots * kBlockTokens;
      bool finite = true;
      double k_min = std::numeric_limits<double>::infinity();
      for (std::int64_t c = 0; c < work[w].slots; ++c) {
        const std::int64_t j = work[w].first_slot + c;
        const std::int64_t p = clamp_page(in.table.at(i, block_of_slot(j, args.rank, args.world)), layout.pages);
        const PageScan scan = widen_page(in.cache.page(p), k.row(c * kBlockTokens).data(),
                                         k_abs.row(c * kBlockTokens).data());
        finite = finite && scan.finite;
        k_min = std::fmin(k_min, scan.min_nonzero);
        s.page[static_cast<std::size_t>(i * L + j)] = p;
      }
      auto d = dots.leftCols(rows);
      auto m = mags.leftCols(rows);
      d.noalias() = q.middleRows(i * R, R) * k.topRows(rows).transpose();
      m.noalias() = q_abs.middleRows(i * R, R) * k_abs.topRows(rows).transpose();
      const bool overflow = m.maxCoeff() > overflow_limit;

      for (std::int64_t c = 0; c < work[w].slots; ++c) {
        const std::int64_t j = work[w].first_slot + c;
        const std::int64_t b = block_of_slot(j, args.rank, args.world);
        for (std::int64_t n = 0; n < R; ++n) {
          const std::int64_t t = tile_token(n, H), h = tile_head(n, H);
          const std::int64_t row = i * QL + t;
          // Positions qualify as a prefix of the block.
          const std::int64_t prefix =
              std::clamp<std::int64_t>(causal_cutoff(len, QL, t) - b * kBlockTokens, 0, kBlockTokens);
          double best = kNegInf, best_mag = 0.0;
          if (prefix > 0) {
            best = (scale * d.row(n).segment(c * kBlockTokens, prefix)).maxCoeff();
            best_mag = m.row(n).segment(c * kBlockTokens, prefix).maxCoeff();
          }
          const std::size_t e = static_cast<std::size_t>(s.index(h, row, j));
          s.exact[e] = best;
          s.bound[e] = tolerance_bound(s.scale, best_mag, best);
          if (out) out->at(h, row, j) = stored_value(best);
          s.written[static_cast<std::size_t>(row * L + j)] = 1;
        }
      }
      const bool underflow = k_min * q_min < static_cast<double>(FLT_MIN);
      if (!finite || overflow || underflow) {
        std::ostringstream msg;
        msg << "index_cache pages of request " << i << ", slots " << work[w].first_slot << ".."
            << work[w].first_slot + work[w].slots - 1 << ", "
            << (!finite ? "hold a non-finite value"
                        : overflow ? "give products or sums that overflow fp32"
                                   : "give nonzero products below fp32's normal range");
#pragma omp critical(ctxscore_out_of_contract)
        if (page_problem.empty()) page_problem = msg.str();
      }
    }
  }
  if (!s.out_of_contract && !page_problem.empty()) s.out_of_contract = page_problem;
  return s;
}

}  // namespace ctxscore

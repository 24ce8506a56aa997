#include "ctxscore/score.hpp"

#include <algorithm>
#include <cfloat>
#include <cstring>
#include <cmath>
#include <limits>
#include <sstream>

namespace ctxscore {

namespace {

using ColumnMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
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

// Widens one page to fp64 K (exact) in a loop the compiler vectorises,
// noting non-finite values and the smallest nonzero magnitude.
struct PageScan {
  bool finite;
  double min_nonzero;
};
// Only the first `seen` positions are held to the numeric model: the rest of
// the page reaches no written score (§4) and may hold anything.
PageScan widen_page(const bf16* src, double* k, std::int64_t seen) {
  std::uint32_t bad = 0, min_bits = 0x7fffu;
  for (std::int64_t e = 0; e < kPageElems; ++e) {
    const std::uint32_t b = src[e].value;
    k[e] = bits_to_double(b);
    if (e >= seen * kHeadDim) continue;
    const std::uint32_t a = b & 0x7fffu;
    bad |= static_cast<std::uint32_t>((a & 0x7f80u) == 0x7f80u);
    min_bits = std::min(min_bits, a == 0 ? 0x7fffu : a);
  }
  return {bad == 0, min_bits == 0x7fffu ? std::numeric_limits<double>::infinity() : bits_to_double(min_bits)};
}

// One page's two products with a request's query rows, Σ_d k·q and
// Σ_d |k|·|q| for every (position, row), accumulated dim by dim in Eigen
// fixed-size blocks: Rows rows × Positions positions of both sums stay in
// registers from the first dim to the last, each position's column growing
// by a query column times that position's key value. Eigen's general
// product would re-pack the 128 × 128 page for a handful of rows on every
// call; here the page is read in place. Every sum runs over d = 0..127 in
// order, whichever block holds it, so results do not depend on blocking.
//   qt, qt_abs: column d holds dim d of the rows, `rows` of them (padded)
//   k: the widened page, position-major; dots, mags: [position][rows]
template <int Rows, int Positions>
void page_products(const double* qt, const double* qt_abs, std::int64_t rows, const double* k, double* dots,
                   double* mags) {
  using Block = Eigen::Matrix<double, Rows, Positions>;
  using Column = Eigen::Matrix<double, Rows, 1>;
  using Out = Eigen::Map<Block, Eigen::Unaligned, Eigen::OuterStride<>>;
  static_assert(kBlockTokens >= Positions, "one block of positions fits a page");
  for (std::int64_t r0 = 0; r0 < rows; r0 += Rows)
    for (std::int64_t p = 0; p < kBlockTokens; p += Positions) {
      // The last block overlaps the one before it rather than running short.
      const std::int64_t p0 = std::min<std::int64_t>(p, kBlockTokens - Positions);
      Block dot = Block::Zero(), mag = Block::Zero();
      for (std::int64_t d = 0; d < kHeadDim; ++d) {
        const Eigen::Map<const Column> q(qt + d * rows + r0), q_abs(qt_abs + d * rows + r0);
        for (int c = 0; c < Positions; ++c) {
          const double key = k[(p0 + c) * kHeadDim + d];
          dot.col(c).noalias() += q * key;
          mag.col(c).noalias() += q_abs * std::fabs(key);
        }
      }
      Out(dots + p0 * rows + r0, Rows, Positions, Eigen::OuterStride<>(rows)) = dot;
      Out(mags + p0 * rows + r0, Rows, Positions, Eigen::OuterStride<>(rows)) = mag;
    }
}

// Rows of a request's query block as the products consume them: a multiple
// of the row block (8 rows fill one 512-bit vector of fp64).
std::int64_t padded_rows(std::int64_t r) { return r <= 8 ? 8 : ceil_div(r, 16) * 16; }

void request_products(const double* qt, const double* qt_abs, std::int64_t rows, const double* k, double* dots,
                      double* mags) {
  // Block shapes keep both sums' accumulators plus their operands within
  // 32 vector registers (16 rows × 5 positions: 20 accumulators, measured
  // ahead of 4 and 6 positions).
  if (rows == 8)
    page_products<8, 12>(qt, qt_abs, rows, k, dots, mags);
  else
    page_products<16, 5>(qt, qt_abs, rows, k, dots, mags);
}

}  // namespace

float stored_value(double exact) { return static_cast<float>(exact); }

double tolerance_bound(float scale, double max_abs_sum, double exact) {
  if (exact == kNegInf) return 0.0;
  return std::fabs(static_cast<double>(scale)) * kSumErr * max_abs_sum + ulp_of(stored_value(exact));
}

ShardScores empty_shard(std::int64_t heads, std::int64_t query_len, std::int64_t rank, std::int64_t world,
                        std::int64_t global, std::vector<std::int32_t> lens, double sm_scale) {
  ShardScores s;
  s.heads = heads;
  s.batch = static_cast<std::int64_t>(lens.size());
  s.query_len = query_len;
  s.tokens = s.batch * query_len;
  s.rank = rank;
  s.world = world;
  s.global = global;
  s.slots = local_slots(global, world);
  s.lens = std::move(lens);
  s.scale = scale_fp32(sm_scale);
  return s;
}

ShardScores score_shard(const ScoreArgs& args) {
  const Layout layout = validate(args);
  const Geometry& g = layout.geometry;
  if (args.out && !out_fits(args, layout))
    throw ContractError(Clause::out_shape, "out: " + out_requirement(args, layout));
  const InputViews in = views_of(args);
  const std::int64_t H = layout.heads, QL = args.max_query_len, T = layout.tokens, L = g.local;
  const std::int64_t B = layout.batch, R = H * QL;

  ShardScores s = empty_shard(H, QL, args.rank, args.world, g.global,
                              std::vector<std::int32_t>(in.lens.data, in.lens.data + in.lens.batch), args.sm_scale);
  s.exact.assign(static_cast<std::size_t>(H * T * L), std::numeric_limits<double>::quiet_NaN());
  s.bound.assign(s.exact.size(), 0.0);
  s.written.assign(static_cast<std::size_t>(T * L), 0);
  s.page.assign(static_cast<std::size_t>(B * L), -1);
  if (!std::isfinite(s.scale)) s.out_of_contract = "SCALE = fp32(sm_scale * log2e) is not finite";

  // Queries as fp64, per request transposed: column (c, d) holds dim d of
  // the tile rows n = t·H + h of the request given column c, padded with
  // zero rows to NR. Only requests that scan something here get a column:
  // a batch of 70000 mostly empty requests would otherwise zero a gigabyte.
  const std::int64_t NR = padded_rows(R);
  std::vector<std::int64_t> column(static_cast<std::size_t>(B), -1);
  std::int64_t columns = 0;
  for (std::int64_t i = 0; i < B; ++i)
    if (scan_slots(in.lens.at(i), g.global, L, args.rank, args.world) > 0) column[static_cast<std::size_t>(i)] = columns++;
  ColumnMatrix qt = ColumnMatrix::Zero(NR, columns * kHeadDim);
  double q_min = std::numeric_limits<double>::infinity();
  for (std::int64_t row = 0; row < T; ++row)
    for (std::int64_t h = 0; h < H; ++h) {
      const bf16* src = in.q.row(row, h);
      // A request that scans nothing here reads no query row: its rows may hold anything.
      const std::int64_t c = column[static_cast<std::size_t>(row / QL)];
      if (c < 0) continue;
      if (!finite_min(src, kHeadDim, q_min) && !s.out_of_contract) {
        std::ostringstream m;
        m << "idx_q holds a non-finite value at token " << row << " head " << h;
        s.out_of_contract = m.str();
      }
      const std::int64_t n = (row % QL) * H + h;
      for (std::int64_t d = 0; d < kHeadDim; ++d) qt(n, c * kHeadDim + d) = static_cast<float>(src[d]);
    }
  const ColumnMatrix qt_abs = qt.cwiseAbs();

  struct Work {
    std::int64_t request, slot;
  };
  std::vector<Work> work;
  for (std::int64_t i = 0; i < B; ++i) {
    const std::int64_t scan = scan_slots(in.lens.at(i), g.global, L, args.rank, args.world);
    for (std::int64_t j = 0; j < scan; ++j) work.push_back({i, j});
  }

  std::string page_problem;
  const double scale = s.scale, abs_scale = std::fabs(scale);
  const double overflow_limit = static_cast<double>(FLT_MAX) / std::fmax(1.0, abs_scale);
  const std::optional<ScoresView> out =
      args.out ? std::optional<ScoresView>(scores_view_of(*args.out)) : std::nullopt;
#pragma omp parallel
  {
    std::vector<double> k(kPageElems), dots(kBlockTokens * NR), mags(kBlockTokens * NR);
    std::vector<double> best(R), best_mag(R), largest(R);
    std::vector<std::int64_t> prefix(R);
#pragma omp for schedule(dynamic, 4)
    for (std::size_t w = 0; w < work.size(); ++w) {
      const std::int64_t i = work[w].request, j = work[w].slot, len = in.lens.at(i);
      const std::int64_t b = block_of_slot(j, args.rank, args.world);
      const std::int64_t p = clamp_page(in.table.at(i, b), layout.pages);
      const std::int64_t reach = request_prefix(b, len);
      const PageScan page = widen_page(in.cache.page(p), k.data(), reach);
      s.page[static_cast<std::size_t>(i * L + j)] = p;
      const std::int64_t c = column[static_cast<std::size_t>(i)];
      request_products(qt.col(c * kHeadDim).data(), qt_abs.col(c * kHeadDim).data(), NR, k.data(), dots.data(),
                       mags.data());
      // Row n sees the first prefix[n] positions of the block.
      for (std::int64_t n = 0; n < R; ++n) {
        prefix[n] = qualifying_prefix(b, causal_cutoff(len, QL, tile_token(n, H)));
        best[n] = kNegInf;
        best_mag[n] = largest[n] = 0.0;
      }
      // Position by position, every row at once (the inner loop vectorises).
      for (std::int64_t pos = 0; pos < kBlockTokens; ++pos) {
        const double* dot = dots.data() + pos * NR;
        const double* mag = mags.data() + pos * NR;
        for (std::int64_t n = 0; n < R; ++n) {
          const bool seen = pos < prefix[n];
          best[n] = seen ? std::max(best[n], scale * dot[n]) : best[n];
          best_mag[n] = seen ? std::max(best_mag[n], mag[n]) : best_mag[n];
          largest[n] = pos < reach ? std::max(largest[n], mag[n]) : largest[n];
        }
      }
      for (std::int64_t n = 0; n < R; ++n) {
        const std::int64_t row = i * QL + tile_token(n, H), h = tile_head(n, H);
        const std::size_t e = static_cast<std::size_t>(s.index(h, row, j));
        s.exact[e] = best[n];
        s.bound[e] = tolerance_bound(s.scale, best_mag[n], best[n]);
        if (out) out->at(h, row, j) = stored_value(best[n]);
        s.written[static_cast<std::size_t>(row * L + j)] = 1;
      }
      const bool overflow = *std::max_element(largest.begin(), largest.end()) > overflow_limit;
      const bool underflow = page.min_nonzero * q_min < static_cast<double>(FLT_MIN);
      if (!page.finite || overflow || underflow) {
        std::ostringstream msg;
        msg << "index_cache page " << p << " (request " << i << ", slot " << j << ") "
            << (!page.finite ? "holds a non-finite value"
                             : overflow ? "gives products or sums that overflow fp32"
                                        : "gives nonzero products below fp32's normal range");
#pragma omp critical(ctxscore_out_of_contract)
        if (page_problem.empty()) page_problem = msg.str();
      }
    }
  }
  if (!s.out_of_contract && !page_problem.empty()) s.out_of_contract = page_problem;
  return s;
}

}  // namespace ctxscore

#include "ctxscore/case.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace ctxscore {

namespace {

template <typename T>
void print_list(std::ostream& s, const std::vector<T>& v, std::size_t limit) {
  s << '[';
  for (std::size_t k = 0; k < v.size() && k < limit; ++k) s << (k ? "," : "") << v[k];
  if (v.size() > limit) s << ",...(" << v.size() << " in all)";
  s << ']';
}

}  // namespace

Case Case::resolved() const {
  Case c = *this;
  if (c.q_head_stride == 0) c.q_head_stride = kHeadDim;
  if (c.q_token_stride == 0) c.q_token_stride = c.heads * c.q_head_stride;
  if (c.out_rows == 0) c.out_rows = c.tokens();
  if (c.out_slots == 0) c.out_slots = c.local();
  if (c.out_slot_stride == 0 && c.out_row_stride == 0 && c.out_head_stride == 0) {
    c.out_slot_stride = 1;
    c.out_row_stride = c.out_slots;
    c.out_head_stride = c.out_rows * c.out_slots;
  }
  return c;
}

Case Case::with_packed_out() const {
  Case c = *this;
  c.out_rows = c.out_slots = c.out_head_stride = c.out_row_stride = c.out_slot_stride = 0;
  return c;
}

Case Case::unsharded() const {
  Case c = with_packed_out();
  c.world = 1;
  c.rank = 0;
  c.geometry.reset();
  return c.resolved();
}

std::string Case::str() const {
  std::ostringstream s;
  s.precision(17);
  s << "Case{" << name << " seed=" << seed << (zero_queries ? " queries=zero" : "") << " B=" << batch() << " H=" << heads << " QL=" << query_len
    << " world=" << world << " rank=" << rank << " S=" << max_seq_len << " P=" << pages
    << " sm_scale=" << sm_scale << " lens=";
  print_list(s, seq_lens, 64);
  s << " table[w=" << table_width << ",rs=" << table_row_stride << "]=";
  print_list(s, block_table, 256);
  s << " q_strides=(" << q_token_stride << "," << q_head_stride << ",1)"
    << " out=[" << heads << "," << out_rows << "," << out_slots << "](" << out_head_stride << ","
    << out_row_stride << "," << out_slot_stride << ")";
  if (geometry) {
    s << " geometry=chunk" << geometry->chunk << "/grid_y" << geometry->grid_y;
    if (geometry->teams > 0) s << "/teams" << geometry->teams;
    if (geometry->ring_pages > 0) s << "/ring_pages" << geometry->ring_pages;
  }
  s << "}";
  return s.str();
}

void showValue(const Case& c, std::ostream& os) { os << c.str(); }

HostCase materialize(const Case& input) {
  const Case c = input.resolved();
  const std::int64_t q_dense = c.tokens() * c.heads * kHeadDim;
  std::vector<bf16> q(static_cast<std::size_t>(q_dense));
  for (std::int64_t e = 0; e < q_dense && !c.zero_queries; ++e)
    q[static_cast<std::size_t>(e)] =
        Eigen::numext::bit_cast<bf16>(content_bits(c.seed, Stream::queries, static_cast<std::uint64_t>(e)));
  std::vector<bf16> cache(static_cast<std::size_t>(c.pages * kPageElems));
  const std::int64_t n = c.pages * kPageElems;
#pragma omp parallel for schedule(static)
  for (std::int64_t e = 0; e < n; ++e)
    cache[static_cast<std::size_t>(e)] =
        Eigen::numext::bit_cast<bf16>(content_bits(c.seed, Stream::cache, static_cast<std::uint64_t>(e)));
  // Poison where the call must not look (CONTRACT.md §4): the query rows of
  // a request that scans nothing here, and every cache position past the
  // reach of every slot that reads its page (whole pages no slot reads), so
  // a kernel that reads them and masks afterwards shows it.
  const bf16 poison = Eigen::numext::bit_cast<bf16>(poison_bits(c.seed));
  std::vector<std::int64_t> seen(static_cast<std::size_t>(c.pages), 0);  // positions of page p some slot sees
  for (std::int64_t i = 0; i < c.batch(); ++i) {
    const std::int64_t len = c.seq_lens[static_cast<std::size_t>(i)];
    const std::int64_t scan = scan_slots(len, c.global(), c.local(), c.rank, c.world);
    for (std::int64_t j = 0; j < scan; ++j) {
      const std::int64_t b = block_of_slot(j, c.rank, c.world);
      std::int64_t& s = seen[static_cast<std::size_t>(clamp_page(c.table_entry(i, b), c.pages))];
      s = std::max(s, request_prefix(b, len));
    }
    if (scan == 0)
      std::fill(q.begin() + i * c.query_len * c.heads * kHeadDim, q.begin() + (i + 1) * c.query_len * c.heads * kHeadDim, poison);
  }
  for (std::int64_t p = 0; p < c.pages; ++p)
    std::fill(cache.begin() + p * kPageElems + seen[static_cast<std::size_t>(p)] * kHeadDim, cache.begin() + (p + 1) * kPageElems,
              poison);
  return lay_out(c, q, std::move(cache));
}

HostCase lay_out(const Case& input, const std::vector<bf16>& q_dense, std::vector<bf16> cache) {
  HostCase hc;
  hc.spec = input.resolved();
  const Case& c = hc.spec;
  const std::int64_t T = c.tokens(), H = c.heads, B = c.batch();

  const std::int64_t q_elems = T == 0 ? 0 : (T - 1) * c.q_token_stride + (H - 1) * c.q_head_stride + kHeadDim;
  hc.q.assign(static_cast<std::size_t>(std::max<std::int64_t>(q_elems, 1)),
              Eigen::numext::bit_cast<bf16>(std::uint16_t{0x7FC0}));
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < H; ++h)
      std::copy_n(q_dense.begin() + (t * H + h) * kHeadDim, kHeadDim,
                  hc.q.begin() + t * c.q_token_stride + h * c.q_head_stride);
  hc.cache = std::move(cache);

  hc.table.resize(static_cast<std::size_t>(std::max<std::int64_t>(B * c.table_row_stride, 1)));
  for (std::size_t e = 0; e < hc.table.size(); ++e)
    hc.table[e] = static_cast<std::int32_t>(splitmix(c.seed + 0x7AB1Eull + e) % static_cast<std::uint64_t>(c.pages));
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t b = 0; b < c.table_width; ++b)
      hc.table[static_cast<std::size_t>(i * c.table_row_stride + b)] =
          c.table_entry(i, b);
  hc.lens = c.seq_lens;
  if (hc.lens.empty()) hc.lens.push_back(0);  // a non-null buffer for an empty batch

  const ScoresView o = hc.out_layout();
  hc.out.assign(static_cast<std::size_t>(std::max<std::int64_t>(o.extent(), 1)), c.sentinel);
  return hc;
}

ScoreArgs HostCase::args(Device device) {
  const Case& c = spec;
  ScoreArgs a;
  a.idx_q = make_strided(q.data(), DType::bf16, device, {c.tokens(), c.heads, kHeadDim},
                         {c.q_token_stride, c.q_head_stride, 1});
  a.index_cache = make_tensor(cache.data(), DType::bf16, device, {c.pages, kBlockTokens, kHeadDim});
  a.block_table = make_strided(table.data(), DType::i32, device, {c.batch(), c.table_width}, {c.table_row_stride, 1});
  a.seq_lens = make_tensor(lens.data(), DType::i32, device, {c.batch()});
  a.max_seq_len = c.max_seq_len;
  a.rank = c.rank;
  a.world = c.world;
  a.max_query_len = c.query_len;
  a.sm_scale = c.sm_scale;
  a.out = make_strided(out.data(), DType::f32, device, {c.heads, c.out_rows, c.out_slots},
                       {c.out_head_stride, c.out_row_stride, c.out_slot_stride});
  return a;
}

ScoresView HostCase::out_layout() const {
  const Case& c = spec;
  return {nullptr, c.heads, c.out_rows, c.out_slots, c.out_head_stride, c.out_row_stride, c.out_slot_stride};
}

}  // namespace ctxscore

#include "ctxscore/harness/named_cases.hpp"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <tuple>

#include "ctxscore/harness/case_builder.hpp"

namespace ctxscore::harness {

const char* family_name(CaseFamily f) {
  switch (f) {
    case CaseFamily::upstream: return "upstream";
    case CaseFamily::edge: return "edge";
    case CaseFamily::peer: return "peer";
    case CaseFamily::benchmark: return "benchmark";
    case CaseFamily::batch: return "batch";
  }
  return "?";
}

namespace {

// Upstream test 1: two requests of 130 and 250 tokens, world 2, two heads;
// the bound 512 (G 4, L 2) leaves slot 1 of both requests unwritten.
Case upstream_two_requests(std::int64_t rank) {
  return CaseBuilder("upstream_two_requests_rank" + std::to_string(rank))
      .seed(11).heads(2).world(2).rank(rank).bound(512).pages(8)
      .lens({130, 250})
      .table({3, 5, 0, 0, 6, 1, 0, 0}, 4)
      .build();
}

// Upstream test 2: lengths 1000, 4000, 2500 at world 4, rank 2, under the
// tight bound 4000 and the loose 8192 and 65536. One table (as wide as the
// loosest bound's G) and one out allocation [H, 3, 128] serve every bound,
// so the written slots can be compared bitwise across them.
Case upstream_bound_independence(std::int64_t bound) {
  const std::int64_t width = global_blocks(65536), slots = local_slots(width, 4);
  std::vector<std::int32_t> table;
  for (std::int64_t e = 0; e < 3 * width; ++e) table.push_back(static_cast<std::int32_t>((e * 13) % 16));
  return CaseBuilder("upstream_bound_independence_S" + std::to_string(bound))
      .seed(22).heads(4).world(4).rank(2).bound(bound).pages(16)
      .lens({1000, 4000, 2500})
      .table(table, width)
      .out(3, slots, 3 * slots, slots, 1)
      .build();
}

// Upstream test 3: eight requests of 2048 tokens whose every page id is
// 2^20 over a one-page cache, world 4.
Case upstream_unpopulated_table() {
  return CaseBuilder("upstream_unpopulated_table")
      .seed(33).heads(4).world(4).rank(1).bound(2048).pages(1)
      .lens(std::vector<std::int32_t>(8, 2048))
      .table(every_entry(1 << 20))
      .build();
}

// An edge class at QL 4 and world 2: the request under test beside one of 200 tokens.
Case length_class(const std::string& name, std::uint64_t seed, std::int32_t len) {
  return CaseBuilder(name).seed(seed).heads(2).query_len(4).world(2).rank(0).bound(640).pages(3)
      .lens({len, 200})
      .build();
}

// A batch of `batch` requests, each of length `len(i)`, at H 1, QL 1,
// world 4, rank 1, bound 512 (G 4, one slot): queries of 2^16 rows stay
// near 17 MB and the exact scores cheap. Each request's table row is its
// own, so a request read under another's id scores other pages.
template <typename Len>
Case batch_of(const std::string& name, std::uint64_t seed, std::int64_t batch, const Len& len) {
  std::vector<std::int32_t> lens(static_cast<std::size_t>(batch));
  for (std::int64_t i = 0; i < batch; ++i) lens[static_cast<std::size_t>(i)] = len(i);
  return CaseBuilder(name).seed(seed).heads(1).world(4).rank(1).bound(512).pages(64)
      .lens(std::move(lens))
      .table([](const Case& c, std::int64_t i, std::int64_t b) {
        return static_cast<std::int32_t>((i * 7 + b * 3) % c.pages);
      })
      .build();
}

// An M3 serving shape: `batch` requests of `context` tokens, 4 heads, world
// 4, rank 1, every shard page distinct (nothing is read twice).
Case m3_shape(std::int64_t batch, std::int64_t context, std::int64_t query_len) {
  const std::string name = std::string(query_len == 1 ? "m3_decode" : "m3_speculative") + "_b" +
                           std::to_string(batch) + "_" + std::to_string(context / 1024) + "k";
  const std::int64_t L = local_slots(global_blocks(context), 4);
  return CaseBuilder(name).seed(100).heads(4).query_len(query_len).world(4).rank(1).bound(context)
      .pages(batch * L)
      .lens(std::vector<std::int32_t>(static_cast<std::size_t>(batch), static_cast<std::int32_t>(context)))
      .table(distinct_shard_pages())
      .build();
}

// A peer project's case, stored at M3's shard (world 4, rank 1); the
// registry's test runs it at every rank of worlds 1, 2, 4 and 8.
CaseBuilder peer(const std::string& name, std::uint64_t seed, std::int64_t heads, std::int64_t query_len,
                 std::vector<std::int32_t> lens, std::int64_t bound = 0) {
  const std::int32_t longest = lens.empty() ? 1 : *std::max_element(lens.begin(), lens.end());
  return std::move(CaseBuilder(name).seed(seed).heads(heads).query_len(query_len).world(4).rank(1)
                       .bound(bound > 0 ? bound : std::max<std::int32_t>(longest, 1)).pages(5)
                       .lens(std::move(lens)).table(cycled_pages(3)));
}

template <typename Add>
void add_peer_cases(const Add& add) {
  // AITER's bf16 matrix: query rows per program (H·QL) 1, 4, 16 and 32 at length 4096.
  for (const auto& [rows, h, ql] : {std::tuple{1, 1, 1}, std::tuple{4, 4, 1}, std::tuple{16, 4, 4}, std::tuple{32, 8, 4}})
    add(CaseFamily::peer, "AITER: " + std::to_string(rows) + " query rows per program at length 4096",
        peer("aiter_rows_" + std::to_string(rows) + "_len4096", 60 + rows, h, ql, {4096}).build());
  add(CaseFamily::peer, "AITER: lengths 4, 127, 128, 129, 130, 513, 4096 and 8192 at QL 4, H 4",
      peer("aiter_lengths_ql4", 61, 4, 4, {4, 127, 128, 129, 130, 513, 4096, 8192}).build());
  add(CaseFamily::peer, "AITER: the causal straddle, one request of 130 tokens at QL 4",
      peer("aiter_causal_straddle_130", 62, 4, 4, {130}).build());
  add(CaseFamily::peer, "AITER: ragged lengths [130, 4096, 127, 513]",
      peer("aiter_ragged", 63, 4, 4, {130, 4096, 127, 513}).build());
  add(CaseFamily::peer, "AITER: ragged with an empty and a one-token request [0, 4096, 1, 513]",
      peer("aiter_ragged_empty_and_one", 64, 4, 4, {0, 4096, 1, 513}).build());
  add(CaseFamily::peer, "AITER: one long request beside seven of one block [8192] + [128] x 7",
      peer("aiter_one_long_seven_short", 65, 4, 4, {8192, 128, 128, 128, 128, 128, 128, 128}).build());
  add(CaseFamily::peer, "AITER: all-zero queries, every score tied (the selection's tie rules decide)",
      peer("aiter_zero_queries", 66, 4, 4, {4096, 513}).zero_queries().build());
  add(CaseFamily::peer, "AITER: a 2-head slice of a 4-head query tensor (its token stride spans 4 heads)",
      peer("aiter_two_head_slice", 67, 2, 4, {513, 4096}).query_strides(4 * kHeadDim, kHeadDim).build());
  // ATOM: shards left uneven by 257, 129 and 7 blocks; the same under a bound padded past the batch.
  add(CaseFamily::peer, "ATOM: uneven shards of 257, 129 and 7 blocks",
      peer("atom_uneven_shards", 68, 4, 1, {257 * 128, 129 * 128, 7 * 128}).build());
  add(CaseFamily::peer, "ATOM: uneven shards under a bound padded past the batch's longest request",
      peer("atom_bound_padded_past_batch", 68, 4, 1, {257 * 128, 129 * 128, 7 * 128}, 320 * 128).build());
  add(CaseFamily::peer, "AITER: an empty shard (rank 3 of 4 over 3 blocks) with a table exactly G wide",
      CaseBuilder("aiter_empty_shard_narrow_table").seed(70).heads(2).query_len(2).world(4).rank(3).bound(384)
          .pages(3).lens({384, 200, 0}).table(cycled_pages(1)).build());
  // vLLM's CUDA context-parallel test: requests of these page counts.
  std::vector<std::int32_t> lens;
  for (const std::int32_t pages : {0, 1, 3, 15, 16, 17, 129, 2048, 2049, 5078, 8192, 8197}) lens.push_back(pages * 128);
  add(CaseFamily::peer, "vLLM: requests of 0, 1, 3, 15, 16, 17, 129, 2048, 2049, 5078, 8192 and 8197 pages",
      peer("vllm_cp_page_counts", 69, 1, 1, lens).build());
}

std::vector<NamedCase> build_registry() {
  std::vector<NamedCase> v;
  const auto add = [&v](CaseFamily f, std::string what, Case c, double upstream_us = 0) {
    v.push_back({f, std::move(what), std::move(c), upstream_us});
  };
  for (std::int64_t rank = 0; rank < 2; ++rank)
    add(CaseFamily::upstream, "two requests, world 2: written slots, a sentinel past scan, each rank",
        upstream_two_requests(rank));
  for (std::int64_t bound : {4000, 8192, 65536})
    add(CaseFamily::upstream, "written slots bitwise the same under any bound >= every length",
        upstream_bound_independence(bound));
  add(CaseFamily::upstream, "every page id 2^20 over a one-page cache: clamped, never dereferenced",
      upstream_unpopulated_table());

  add(CaseFamily::edge, "rank 3 of 4 with requests too short to reach it",
      CaseBuilder("empty_high_ranks").seed(14).heads(2).world(4).rank(3).bound(1024).pages(3)
          .lens({100, 300, 0, 520}).build());
  const std::pair<const char*, std::int32_t> lengths[] = {
      {"length_0", 0}, {"length_1", 1}, {"length_ql_minus_1", 3}, {"length_ql", 4}, {"length_127", 127},
      {"length_128", 128}, {"length_129", 129}, {"length_3x128_minus_1", 383}, {"length_3x128_plus_1", 385},
      {"length_equal_bound", 640}, {"length_past_bound", 700}};
  std::uint64_t seed = 20;
  for (const auto& [name, len] : lengths)
    add(CaseFamily::edge, "a request of " + std::to_string(len) + " tokens at QL 4", length_class(name, seed++, len));
  add(CaseFamily::edge, "M3's speculative decode: H 4, world 4, QL 4",
      CaseBuilder("speculative_decode_ql4").seed(40).heads(4).query_len(4).world(4).rank(1).bound(2048).pages(4)
          .lens({900, 77, 1500}).build());
  {
    const std::int32_t ids[] = {-1, 3, 4, 1 << 20, INT32_MIN, INT32_MAX, 0, 2, -7, 1};
    add(CaseFamily::edge, "out-of-range page ids of every kind, clamped into [0, P-1]",
        CaseBuilder("oob_pages").seed(41).heads(2).world(1).bound(1280).pages(3).lens({1100, 640})
            .table([ids](const Case& c, std::int64_t i, std::int64_t b) { return ids[(i * c.table_width + b) % 10]; })
            .build());
  }
  add(CaseFamily::edge, "world 1: every block is the rank's own",
      CaseBuilder("world_1").seed(42).heads(3).query_len(2).world(1).bound(1024).pages(4).lens({700, 129, 1}).build());
  add(CaseFamily::edge, "world 16, rank 5",
      CaseBuilder("world_16").seed(43).heads(2).world(16).rank(5).bound(4096).pages(4).lens({2100, 1000, 3000}).build());
  add(CaseFamily::edge, "a bound far past every length: most slots unwritten",
      CaseBuilder("bound_far_past_lengths").seed(44).heads(2).world(4).bound(65536).pages(2).lens({300, 129, 40}).build());
  add(CaseFamily::edge, "padded query strides, a wide table row stride, a larger strided out",
      CaseBuilder("strided_layouts").seed(45).heads(3).query_len(2).world(2).rank(1).bound(768).pages(3)
          .lens({500, 260})
          .table(cycled_pages(5), 1).table_row_stride(global_blocks(768) + 4)
          .query_strides(3 * 136 + 5, 136)
          .out(2 * 2 + 2, local_slots(global_blocks(768), 2) + 1, 1, 3, 3 * (2 * 2 + 2))
          .build());
  add(CaseFamily::edge, "sm_scale 1/16, not upstream's 1/sqrt(128): a kernel must take the argument",
      CaseBuilder("sm_scale_one_sixteenth").seed(47).heads(2).query_len(2).world(2).rank(1).bound(1024).pages(3)
          .sm_scale(0.0625).lens({700, 300}).build());
  add(CaseFamily::edge, "a negative sm_scale: the max of the scaled scores is not the scaled max",
      CaseBuilder("sm_scale_negative").seed(48).heads(2).world(2).rank(0).bound(768).pages(3)
          .sm_scale(-0.08838834764831845).lens({600, 140}).build());
  add(CaseFamily::edge, "a forced chunking, CHUNK 1, with programs past the last slot",
      CaseBuilder("forced_chunk_1_extra_programs").seed(46).heads(2).world(2).rank(1).bound(2048).pages(3)
          .lens({1000, 400})
          .geometry(GeometryOverride{1, local_slots(global_blocks(2048), 2) + 3})
          .build());

  add_peer_cases(add);

  // Request ids past 16 bits (AITER tests ids 32767, 32768 and 65534): only
  // those requests and the first reach rank 1's block, so a request read
  // under a wrapped id is seen. The longer batch has ids 65535, 65536 and
  // 69999 live and one request in 1024 besides: a port scores it in
  // seconds, not minutes.
  add(CaseFamily::batch, "AITER: 65535 requests, ids 0, 32767, 32768 and 65534 live (int16 ids wrap)",
      batch_of("request_ids_32767_32768_65534", 80, 65535, [](std::int64_t i) {
        return i == 0 ? 300 : i == 32767 ? 512 : i == 32768 ? 200 : i == 65534 ? 385 : 0;
      }));
  add(CaseFamily::batch, "70000 requests, ids 0, 65535, 65536, 69999 and one in 1024 live: ids past 2^16 (uint16 ids wrap)",
      batch_of("batch_past_2_16_requests", 81, 70000, [](std::int64_t i) {
        if (i == 0 || i == 65535 || i == 65536 || i == 69999 || i % 1024 == 7)
          return static_cast<std::int32_t>((i * 2654435761u >> 7) % 512 + 1);
        return 0;
      }));

  // The kernel benchmark's shapes, with the upstream Triton kernel's times (µs) on an H200.
  const struct {
    std::int64_t batch, context;
    double upstream_us;
  } m3[] = {{1, 32768, 6.3},       {1, 131072, 8.6},     {8, 32768, 9.7},
            {8, 131072, 21.6},     {1, 1 << 20, 23.7},   {64, 32768, 36.7},
            {64, 131072, 130.7},   {8, 1 << 20, 128.9},  {256, 131072, 492}};
  for (const auto& s : m3)
    add(CaseFamily::benchmark, "M3 decode (H 4, world 4, QL 1)", m3_shape(s.batch, s.context, 1), s.upstream_us);
  for (const auto& s : m3)
    add(CaseFamily::benchmark, "M3 speculative decode (H 4, world 4, QL 4)", m3_shape(s.batch, s.context, 4));
  add(CaseFamily::benchmark, "16 heads, world 1: a tile of one m-tile, every block the rank's",
      CaseBuilder("h16_world1_b64_64k").seed(100).heads(16).world(1).bound(65536).pages(64 * 512)
          .lens(std::vector<std::int32_t>(64, 65536)).table(distinct_shard_pages()).build());
  return v;
}

}  // namespace

const std::vector<NamedCase>& named_cases() {
  static const std::vector<NamedCase> registry = build_registry();
  return registry;
}

const NamedCase& named_case(const std::string& name) {
  for (const NamedCase& n : named_cases())
    if (n.spec.name == name) return n;
  std::string known;
  for (const NamedCase& n : named_cases()) known += " " + n.spec.name;
  throw std::invalid_argument("no named case \"" + name + "\"; the registry holds:" + known);
}

std::vector<Case> corpus_cases() {
  std::vector<Case> v;
  for (const NamedCase& n : named_cases())
    if (n.family == CaseFamily::upstream || n.family == CaseFamily::edge || n.family == CaseFamily::peer)
      v.push_back(n.spec);
  return v;
}

std::vector<Case> family_cases(CaseFamily f) {
  std::vector<Case> v;
  for (const NamedCase& n : named_cases())
    if (n.family == f) v.push_back(n.spec);
  return v;
}

std::vector<Case> at_every_rank_of_worlds_1_2_4_8(const Case& c) {
  std::vector<Case> v;
  for (const std::int64_t world : {1, 2, 4, 8})
    for (std::int64_t rank = 0; rank < world; ++rank) {
      Case s = c.with_packed_out();
      s.world = world;
      s.rank = rank;
      v.push_back(s.resolved());
    }
  return v;
}

}  // namespace ctxscore::harness

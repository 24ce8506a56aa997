#include "ctxscore/harness/compile_keys.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>

#include "ctxscore/contents.hpp"
#include "ctxscore/harness/campaign.hpp"

namespace ctxscore::harness {

namespace {

// A prototype's case with its lengths, page table and contents drawn anew:
// the same constants and call shape, so the same compile key.
rc::Gen<Case> genWithinKey(const Case& proto, const gen::CaseLimits& lim) {
  return rc::gen::exec([proto, lim] {
    Case c = proto;
    c.seed = *rc::gen::arbitrary<std::uint32_t>();
    c.seq_lens = *rc::gen::container<std::vector<std::int32_t>>(proto.seq_lens.size(),
                                                                gen::genSeqLen(c.max_seq_len, c.query_len));
    gen::shrink_to_budget(c, lim.max_work);
    c.block_table = *gen::genPageTable(c.batch(), c.table_width, c.pages);
    return c.resolved();
  });
}

}  // namespace

std::string CompileKey::str() const {
  std::ostringstream o;
  o << "H=" << heads << " QL=" << query_len << " world=" << world << " rank=" << rank << " CHUNK=" << chunk
    << " N=" << tile_n << " sm_scale=" << sm_scale << " | " << call_shape;
  return o.str();
}

CompileKey compile_key(const Case& c) {
  const Geometry g = launch_geometry(c.batch(), c.max_seq_len, c.world, c.heads, c.query_len);
  CompileKey k;
  k.heads = c.heads;
  k.query_len = c.query_len;
  k.world = c.world;
  k.rank = c.rank;
  k.chunk = c.geometry ? c.geometry->chunk : g.chunk;
  k.tile_n = g.tile_n;
  k.sm_scale = c.sm_scale;
  std::ostringstream shape;
  shape << "B=" << c.batch() << " S=" << c.max_seq_len << " P=" << c.pages << " table=" << c.table_width << "/"
        << c.table_row_stride << " q=" << c.q_token_stride << "," << c.q_head_stride << " out=" << c.out_rows << "x"
        << c.out_slots << "/" << c.out_head_stride << "," << c.out_row_stride << "," << c.out_slot_stride;
  k.call_shape = shape.str();
  return k;
}

std::unique_lock<std::recursive_mutex> generating() {
  static std::recursive_mutex m;
  return std::unique_lock<std::recursive_mutex>(m);
}

CaseSource::CaseSource(const gen::CaseLimits& lim, std::uint64_t run_seed, std::int64_t max_keys) : lim_(lim) {
  if (max_keys <= 0) return;
  lim_.forced_geometry = false;  // a key fixes CHUNK; forced chunkings would add keys
  const auto lock = generating();
  for (std::int64_t j = 0; j < max_keys; ++j) {
    const Case proto = gen::genCase(lim_)(rc::Random(splitmix(run_seed ^ splitmix(0xC0DEull + static_cast<std::uint64_t>(j)))), 100).value();
    const CompileKey key = compile_key(proto);
    if (std::find(keys_.begin(), keys_.end(), key) != keys_.end()) continue;
    keys_.push_back(key);
    prototypes_.push_back(proto);
  }
}

rc::Shrinkable<Case> CaseSource::draw(std::uint64_t case_seed, int size) const {
  if (keys_.empty()) return gen::genCase(lim_)(rc::Random(case_seed), size);
  return draw_from_key(static_cast<std::size_t>(splitmix(case_seed) % keys_.size()), case_seed, size);
}

rc::Shrinkable<Case> CaseSource::draw_from_key(std::size_t j, std::uint64_t case_seed, int size) const {
  return genWithinKey(prototypes_[j], lim_)(rc::Random(splitmix(case_seed ^ 0x5EEDull)), size);
}

std::optional<rc::Shrinkable<Case>> CaseSource::draw_negative_row(std::uint64_t case_seed, int size) const {
  const auto writes = [](const Case& c) { return c.rank < c.global(); };  // slot 0 is block `rank`
  Case c;
  if (keys_.empty()) {
    c = gen::genCase(lim_)(rc::Random(case_seed), size).value();
    c.rank %= std::min(c.world, c.global());  // no key to keep: a rank that owns a block
  } else {
    const std::size_t first = static_cast<std::size_t>(splitmix(case_seed) % keys_.size());
    std::size_t j = first;
    while (!writes(prototypes_[j]))
      if ((j = (j + 1) % keys_.size()) == first) return std::nullopt;
    c = draw_from_key(j, case_seed, size).value();
  }
  // Request i's last token sees position 0 of block `rank` alone; the
  // earlier tokens see none of it (−inf), and its later blocks are past reach.
  const std::int64_t i = static_cast<std::int64_t>(splitmix(case_seed ^ 0x1EA5ull) % static_cast<std::uint64_t>(c.batch()));
  c.seq_lens[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(c.rank * kBlockTokens + 1);
  const std::int32_t wild[] = {INT32_MIN, -1, static_cast<std::int32_t>(c.pages), INT32_MAX};
  for (std::int64_t b = c.rank + 1; b < c.table_width; ++b) c.table_entry(i, b) = wild[b % 4];
  // Each head scores that position below zero with probability about 1/2:
  // 64 draws of the contents leave a miss at 2^-64 or less. The score is
  // the contents' (contents.hpp) at their dense indices, summed exactly.
  c.zero_queries = false;
  const std::int64_t page = clamp_page(c.table_entry(i, c.rank), c.pages), row = i * c.query_len + c.query_len - 1;
  const auto value = [&c](Stream s, std::int64_t e) {
    return static_cast<double>(static_cast<float>(Eigen::numext::bit_cast<bf16>(content_bits(c.seed, s, static_cast<std::uint64_t>(e)))));
  };
  for (std::uint64_t attempt = 0; attempt < 64; ++attempt) {
    c.seed = static_cast<std::uint32_t>(splitmix(case_seed ^ splitmix(0xA11Eull + attempt)));
    for (std::int64_t h = 0; h < c.heads; ++h) {
      double dot = 0;
      for (std::int64_t d = 0; d < kHeadDim; ++d)
        dot += value(Stream::queries, (row * c.heads + h) * kHeadDim + d) * value(Stream::cache, page * kPageElems + d);
      if (static_cast<double>(scale_fp32(c.sm_scale)) * dot < 0) return rc::shrinkable::just(c.resolved());
    }
  }
  return rc::shrinkable::just(c.resolved());  // the floor names the miss
}

bool CaseSource::admits(const Case& c) const {
  return keys_.empty() || std::find(keys_.begin(), keys_.end(), compile_key(c)) != keys_.end();
}

}  // namespace ctxscore::harness

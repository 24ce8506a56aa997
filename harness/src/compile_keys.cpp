#include "ctxscore/harness/compile_keys.hpp"

#include <algorithm>
#include <sstream>

namespace ctxscore::harness {

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

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

CaseSource::CaseSource(const gen::CaseLimits& lim, std::uint64_t run_seed, std::int64_t max_keys) : lim_(lim) {
  if (max_keys <= 0) return;
  lim_.forced_geometry = false;  // a key fixes CHUNK; forced chunkings would add keys
  for (std::int64_t j = 0; j < max_keys; ++j) {
    const Case proto = gen::genCase(lim_)(rc::Random(mix(run_seed ^ mix(0xC0DEull + static_cast<std::uint64_t>(j)))), 100).value();
    const CompileKey key = compile_key(proto);
    if (std::find(keys_.begin(), keys_.end(), key) != keys_.end()) continue;
    keys_.push_back(key);
    prototypes_.push_back(proto);
  }
}

rc::Shrinkable<Case> CaseSource::draw(std::uint64_t case_seed, int size) const {
  if (keys_.empty()) return gen::genCase(lim_)(rc::Random(case_seed), size);
  const std::size_t j = static_cast<std::size_t>(mix(case_seed) % keys_.size());
  return genWithinKey(prototypes_[j], lim_)(rc::Random(mix(case_seed ^ 0x5EEDull)), size);
}

bool CaseSource::admits(const Case& c) const {
  return keys_.empty() || std::find(keys_.begin(), keys_.end(), compile_key(c)) != keys_.end();
}

}  // namespace ctxscore::harness

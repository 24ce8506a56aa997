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

// Draws for one key before falling back to the key's prototype case.
constexpr int kAttempts = 64;

}  // namespace

std::string CompileKey::str() const {
  std::ostringstream o;
  o << "H=" << heads << " QL=" << query_len << " world=" << world << " rank=" << rank << " CHUNK=" << chunk
    << " N=" << tile_n << " sm_scale=" << sm_scale;
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
  return k;
}

CaseSource::CaseSource(const gen::CaseLimits& lim, std::uint64_t run_seed, std::int64_t max_keys) : lim_(lim) {
  if (max_keys <= 0) return;
  lim_.forced_geometry = false;  // a key fixes CHUNK; forced chunkings would add keys
  for (std::int64_t j = 0; j < max_keys; ++j) {
    rc::Shrinkable<Case> proto = gen::genCase(lim_)(rc::Random(mix(run_seed ^ mix(0xC0DEull + static_cast<std::uint64_t>(j)))), 100);
    const CompileKey key = compile_key(proto.value());
    if (std::find(keys_.begin(), keys_.end(), key) != keys_.end()) continue;
    keys_.push_back(key);
    prototypes_.push_back(proto);
  }
}

rc::Shrinkable<Case> CaseSource::draw(std::uint64_t case_seed) const {
  if (keys_.empty()) return gen::genCase(lim_)(rc::Random(case_seed), 100);
  const std::size_t j = static_cast<std::size_t>(mix(case_seed) % keys_.size());
  const CompileKey& key = keys_[j];
  gen::CaseLimits lim = lim_;
  lim.min_heads = lim.max_heads = key.heads;
  lim.min_query_len = lim.max_query_len = key.query_len;
  lim.min_world = lim.max_world = key.world;
  lim.fixed_rank = key.rank;
  for (int a = 0; a < kAttempts; ++a) {
    rc::Shrinkable<Case> c = gen::genCase(lim)(rc::Random(mix(case_seed ^ mix(static_cast<std::uint64_t>(a) + 1))), 100);
    if (compile_key(c.value()) == key) return c;
  }
  return prototypes_[j];
}

bool CaseSource::admits(const Case& c) const {
  return keys_.empty() || std::find(keys_.begin(), keys_.end(), compile_key(c)) != keys_.end();
}

}  // namespace ctxscore::harness

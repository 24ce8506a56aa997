#include "ctxscore/harness/case_limits.hpp"

#include <stdexcept>
#include <utility>

namespace ctxscore::gen {

namespace {

CaseLimits large() {
  CaseLimits lim;
  lim.max_batch = 64;
  lim.max_heads = 16;
  lim.max_query_len = 8;
  lim.max_world = 16;
  lim.max_bound = 1 << 20;
  lim.max_pages = 64;
  lim.max_work = 1 << 15;
  lim.max_out_elems = 1 << 22;
  return lim;
}

CaseLimits m3() {
  CaseLimits lim = large();
  lim.min_heads = lim.max_heads = 4;
  lim.min_world = lim.max_world = 4;
  lim.min_query_len = 1;
  lim.max_query_len = 4;
  return lim;
}

const std::vector<std::pair<std::string, CaseLimits>>& table() {
  static const std::vector<std::pair<std::string, CaseLimits>> t = {
      {"small", CaseLimits{}}, {"large", large()}, {"m3", m3()}};
  return t;
}

}  // namespace

const std::vector<std::string>& limit_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& [name, lim] : table()) v.push_back(name);
    return v;
  }();
  return names;
}

CaseLimits named_limits(const std::string& name) {
  std::string known;
  for (const auto& [n, lim] : table()) {
    if (n == name) return lim;
    known += (known.empty() ? "" : ", ") + n;
  }
  throw std::invalid_argument("no case size \"" + name + "\"; expected one of " + known);
}

CaseLimits kernel_limits(std::int64_t max_teams, std::int64_t max_ring_pages) {
  CaseLimits lim = large();
  lim.forced_geometry = true;
  lim.max_teams = max_teams;
  lim.max_ring_pages = max_ring_pages;
  return lim;
}

}  // namespace ctxscore::gen

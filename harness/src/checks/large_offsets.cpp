// large_offsets: offsets past 2^31, where 32-bit index arithmetic wraps: a
// cache past 2^31 elements with pages read at its far end (a kernel's
// int32 `page * 16384`), out views whose head or row stride puts written
// elements past 2^31 elements, and a query row past 2^31 bytes. Each case
// runs where this host has the memory for three copies of its buffers (the
// harness's, the call's and the reply), else it is listed as not run.
#include <algorithm>
#include <chrono>
#include <fstream>

#include "ctxscore/harness/case_builder.hpp"
#include "ctxscore/harness/checks.hpp"
#include "named_case.hpp"

namespace ctxscore::harness {

namespace {

constexpr std::int64_t kPast31 = (std::int64_t{1} << 31) + 17;

struct LargeCase {
  Case c;
  std::string what;
};

std::vector<LargeCase> large_cases() {
  const std::int32_t far = static_cast<std::int32_t>((std::int64_t{1} << 31) / kPageElems);  // the first page past 2^31 elements
  const std::int64_t token_stride = (std::int64_t{1} << 30) + 64;  // bf16: row 1 starts past 2^31 bytes
  return {
      {CaseBuilder("cache_past_2_31_elements").seed(30).heads(2).query_len(2).world(2).rank(1).bound(1024)
           .pages(far + 8).lens({1000, 700, 129})
           .table({far + 7, far, far + 3, far + 5, far + 1, far + 6, 2, far + 2,   // rank 1 reads blocks 1, 3, 5, 7
                   far + 4, far, 5, far + 7, 4, far + 3, 0, 1,
                   0, far + 1, 1, 2, 3, 4, 5, 6},
                  8)
           .build(),
       "pages past 2^31 cache elements read"},
      {CaseBuilder("out_head_stride_past_2_31").seed(31).heads(2).query_len(2).world(2).rank(1)
           .bound(2048).pages(9).lens({2048, 700}).out(4, 8, kPast31, 8, 1).build(),
       "out's head stride past 2^31 elements"},
      {CaseBuilder("out_row_stride_past_2_31").seed(32).heads(1).query_len(1).world(1).rank(0)
           .bound(1024).pages(9).lens({1024, 300}).out(2, 8, 2 * kPast31, kPast31, 1).build(),
       "out's row stride past 2^31 elements"},
      {CaseBuilder("query_row_past_2_31_bytes").seed(33).heads(2).query_len(1).world(2).rank(0)
           .bound(2048).pages(9).lens({2000, 1500}).query_strides(token_stride, 128).build(),
       "a query row past 2^31 bytes"},
  };
}

// Bytes of the case's buffers: the query allocation, the cache and out.
std::int64_t buffer_bytes(const Case& input) {
  const Case c = input.resolved();
  const std::int64_t q = ((c.tokens() - 1) * c.q_token_stride + (c.heads - 1) * c.q_head_stride + kHeadDim) * 2;
  const std::int64_t out = ((c.heads - 1) * c.out_head_stride + (c.out_rows - 1) * c.out_row_stride +
                            (c.out_slots - 1) * c.out_slot_stride + 1) * 4;
  return q + c.pages * kPageElems * 2 + out;
}

}  // namespace

const std::vector<std::string>& large_offset_cases() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const LargeCase& l : large_cases()) n.push_back(l.c.name);
    return n;
  }();
  return names;
}

std::int64_t available_host_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  std::int64_t kib = 0;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib << 10;
  return 0;
}

namespace {

Suite run(Backend& b, const CheckContext& x) {
  const std::vector<std::string>& only = x.only;
  const TimeBudget* budget = x.drawn.campaign.budget;
  Suite s = suite_for("large_offsets", b, oracle_name(b.oracle()));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> skipped;
  for (const LargeCase& l : large_cases()) {
    if (!only.empty() && std::find(only.begin(), only.end(), l.c.name) == only.end()) continue;
    if (s.stopped = stop_reason(budget, s.stats.cases); !s.stopped.empty()) break;
    const std::int64_t need = 3 * buffer_bytes(l.c), have = available_host_bytes();
    if (have < need) {
      skipped.push_back(l.c.name + " (needs " + std::to_string((need >> 30) + 1) + " GiB of available memory, this host has " +
                        std::to_string(have >> 30) + " GiB)");
      continue;
    }
    checks::judge_named_case(s, b, l.c, l.c.name + ": " + l.what, "it tests nothing past 2^31");
  }
  if (!skipped.empty()) {
    std::string why;
    for (const std::string& k : skipped) why += (why.empty() ? "" : "; ") + k;
    if (s.stats.cases == 0) s.not_run = why;
    else s.stopped = "not run: " + why;
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace

CheckDef large_offsets_check() {
  return {"large_offsets", "a cache past 2^31 elements, out strides past 2^31 elements, a query row past 2^31 bytes", 0,
          {}, "", false, true, run};
}

}  // namespace ctxscore::harness

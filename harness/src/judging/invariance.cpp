#include "ctxscore/harness/invariance.hpp"

#include <algorithm>
#include <cstdio>

#include "ctxscore/bits.hpp"

namespace ctxscore::harness {

std::string Rebatching::str() const {
  return how + ": request " + std::to_string(from) + " becomes request " + std::to_string(to) + " of " + batch.str();
}

Verdict judge_rebatched(Backend& backend, const Case& c, const Rebatching& r, OutMode out) {
  JudgeOptions o;
  o.out = out;
  o.write_failure = false;
  HostCase first = laid_out(c), second = laid_out(r.batch);
  const std::int64_t H = c.heads, QL = c.query_len, L = c.local();
  // The request's query rows, as the first batch laid them out.
  for (std::int64_t t = 0; t < QL; ++t)
    for (std::int64_t h = 0; h < H; ++h)
      std::copy_n(first.q.begin() + (r.from * QL + t) * c.q_token_stride + h * c.q_head_stride, kHeadDim,
                  second.q.begin() + (r.to * QL + t) * r.batch.q_token_stride + h * r.batch.q_head_stride);
  std::vector<float> a, b;
  Verdict v = run_and_judge(backend, first, o, &a);
  if (!v.ok()) return v;
  v = run_and_judge(backend, second, o, &b);
  if (!v.ok()) return v;
  const std::int64_t Ta = c.tokens(), Tb = r.batch.tokens();
  std::int64_t n = 0;
  std::string first_at;
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t t = 0; t < QL; ++t)
      for (std::int64_t j = 0; j < L; ++j) {
        const float x = a[static_cast<std::size_t>((h * Ta + r.from * QL + t) * L + j)];
        const float y = b[static_cast<std::size_t>((h * Tb + r.to * QL + t) * L + j)];
        if (float_bits(x) == float_bits(y)) continue;
        if (n++ == 0) {
          char bits[96];
          std::snprintf(bits, sizeof bits, "token %lld head %lld slot %lld: 0x%08x, then 0x%08x", static_cast<long long>(t),
                        static_cast<long long>(h), static_cast<long long>(j), float_bits(x), float_bits(y));
          first_at = bits;
        }
      }
  // The case is the first batch, as the verdict tells it (the other one is
  // named beside it), not the second, whose call was judged last.
  if (n > 0) v.spec = first.spec;
  if (n > 0)
    v.fail(Fault::batch_dependent, "batch-dependent: " + std::to_string(n) + " of request " + std::to_string(r.from) +
                   "'s elements differ when the batch " + r.how + " (now request " + std::to_string(r.to) + "); first at " +
                   first_at,
           {{"request", std::to_string(r.from)}, {"request_in_other_batch", std::to_string(r.to)}, {"batch_change", r.how},
            {"other_batch", r.batch.str()}, {"elements_differing", std::to_string(n)}, {"first_difference", first_at}});
  return v;
}

}  // namespace ctxscore::harness

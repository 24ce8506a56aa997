#include "ctxscore/harness/pipeline.hpp"

#include <cmath>
#include <limits>
#include <sstream>

#include "ctxscore/bits.hpp"
#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/phases.hpp"

namespace ctxscore::harness {

std::string PipelineVerdict::str() const {
  std::ostringstream s;
  s << (ok() ? "ok" : "FAIL") << " pipeline: " << columns << " shard columns";
  if (!error.empty()) s << "; error: " << error;
  if (!shard_mismatch.empty()) s << "; " << shard_mismatch;
  s << "; higher first: " << higher.str() << "; lower first: " << lower.str();
  return s.str();
}

PipelineVerdict judge_pipeline(Backend& b, const Case& c, const std::vector<OutMode>& out_modes,
                               const SelectionParams& params) {
  PipelineVerdict v;
  v.spec = c;
  const std::int64_t H = c.heads, T = c.tokens(), G = c.global(), L = c.local();
  Case whole = c.unsharded();
  whole.name = c.name + "_world1";
  try {
    HostCase one = laid_out(whole);
    const ShardScores exact = oracle_scores(Oracle::reference, one);
    const std::vector<float> unsharded = written_scores(b.score(one, OutMode::given), one);
    std::vector<std::vector<float>> shards;
    for (std::int64_t r = 0; r < c.world; ++r) {
      Case cr = c;
      cr.rank = r;
      HostCase host = laid_out(cr);
      shards.push_back(written_scores(b.score(host, out_modes[static_cast<std::size_t>(r)]), host));
      for (std::int64_t row = 0; row < T; ++row) {
        const std::int64_t scan = scan_slots(c.seq_lens[static_cast<std::size_t>(row / c.query_len)], G, L, r, c.world);
        for (std::int64_t j = 0; j < scan; ++j) {
          ++v.columns;
          const std::int64_t blk = block_of_slot(j, r, c.world);
          for (std::int64_t h = 0; h < H && v.shard_mismatch.empty(); ++h) {
            const float mine = shards.back()[static_cast<std::size_t>((h * T + row) * L + j)];
            const float theirs = unsharded[static_cast<std::size_t>((h * T + row) * G + blk)];
            if (float_bits(mine) == float_bits(theirs)) continue;
            std::ostringstream m;
            m.precision(9);
            m << "rank " << r << " (out " << out_mode_name(out_modes[static_cast<std::size_t>(r)]) << ") head " << h
              << " row " << row << " slot " << j << " holds " << mine << " (bits " << std::hex << float_bits(mine)
              << "), the world-1 column of block " << std::dec << blk << " " << theirs << " (bits " << std::hex
              << float_bits(theirs) << ")";
            v.shard_mismatch = m.str();
          }
        }
      }
    }
    const PhaseClock clock(Phase::judge);
    std::vector<float> reference(exact.exact.size(), std::numeric_limits<float>::quiet_NaN());
    for (std::size_t e = 0; e < reference.size(); ++e)
      if (!std::isnan(exact.exact[e])) reference[e] = stored_value(exact.exact[e]);
    const SelectionLayout sharded{c.seq_lens, c.query_len, H, G, c.world}, unsharded_layout{c.seq_lens, c.query_len, H, G, 1};
    std::vector<const float*> shard_ptrs;
    for (const auto& s : shards) shard_ptrs.push_back(s.data());
    for (TieRule tie : {TieRule::higher_block_first, TieRule::lower_block_first}) {
      SelectionParams p = params;
      p.tie = tie;
      const Selection got = select_blocks(sharded, shard_ptrs, p);
      const Selection want = select_blocks(unsharded_layout, {reference.data()}, p);
      (tie == TieRule::higher_block_first ? v.higher : v.lower) =
          check_selection(unsharded_layout, 0, got, want, exact.exact, exact.bound, p);
    }
  } catch (const ContractError& e) {
    v.error = std::string("rejected the call (") + clause_name(e.clause()) + "): " + e.what();
    v.error_fault = Fault::raised;
  } catch (const std::exception& e) {
    v.error = e.what();
    v.error_fault = fault_of(e);
  }
  return v;
}

RowsDecided rows_decided(const Case& c, const SelectionParams& params) {
  HostCase one = laid_out(c.unsharded());
  const ShardScores exact = oracle_scores(Oracle::reference, one);
  const SelectionLayout l{c.seq_lens, c.query_len, c.heads, c.global(), 1};
  RowsDecided d;
  for (const double m : selection_margins(l, 0, exact.exact, exact.bound, params)) {
    ++d.rows;
    d.decided += m > 1 && m < 1e300;  // as check_selection counts them
  }
  return d;
}

}  // namespace ctxscore::harness

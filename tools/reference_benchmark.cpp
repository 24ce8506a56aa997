// Speed of the CPU reference, in one run: its scoring rate at tile rows
// N = 4, 16, 64; a naive triple-loop scorer of the same contract; and this
// machine's fp64 FMA peak. Prints the two ratios last. The naive scorer
// (score_shard_naive) is the plain-loop oracle the reference is fuzzed against.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "ctxscore/case.hpp"
#include "ctxscore/score.hpp"

namespace ctxscore {
namespace {

// 8 requests of 16 blocks each, world 1, N = heads tile rows.
Case bench_case(std::int64_t rows) {
  Case c;
  c.name = "bench";
  c.seed = 7;
  c.heads = rows;
  c.max_seq_len = 16 * 128;
  c.pages = 64;
  c.seq_lens = std::vector<std::int32_t>(8, 16 * 128);
  c.table_width = 16;
  c.table_row_stride = 16;
  for (int e = 0; e < 8 * 16; ++e) c.block_table.push_back((e * 5) % 64);
  return c.resolved();
}

// Both products the reference forms per block: the scores and the bound's Σ|k·q|.
double flops_per_call(const Case& c) { return 2.0 * 2.0 * c.heads * 128.0 * 128.0 * 8 * 16; }

// One scorer (the reference or the plain loop) on the case of size N.
template <ShardScores (*Score)(const ScoreArgs&)>
void score_rate(benchmark::State& state) {
  HostCase h = materialize(bench_case(state.range(0)));
  const ScoreArgs a = h.args();
  for (auto _ : state) benchmark::DoNotOptimize(Score(a));
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_call(h.spec) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_Reference(benchmark::State& state) { score_rate<score_shard>(state); }
void BM_Naive(benchmark::State& state) { score_rate<score_shard_naive>(state); }

// fp64 FMA peak over every OpenMP thread: 16 independent vector chains each.
typedef double v8d __attribute__((vector_size(64)));
void BM_Fp64FmaPeak(benchmark::State& state) {
  constexpr int kChains = 16;
  constexpr std::int64_t kIters = 1 << 16;
  const int threads = omp_get_max_threads();
  for (auto _ : state) {
    double sink = 0;
#pragma omp parallel reduction(+ : sink)
    {
      v8d acc[kChains];
      const v8d m = {1.0000001, 0.9999999, 1.0000001, 0.9999999, 1.0000001, 0.9999999, 1.0000001, 0.9999999};
      const v8d a = {1e-9, 1e-9, 1e-9, 1e-9, 1e-9, 1e-9, 1e-9, 1e-9};
      for (int k = 0; k < kChains; ++k) acc[k] = a * (k + 1);
      for (std::int64_t it = 0; it < kIters; ++it)
#pragma GCC unroll 16
        for (int k = 0; k < kChains; ++k) acc[k] = acc[k] * m + a;
      for (int k = 0; k < kChains; ++k)
        for (int l = 0; l < 8; ++l) sink += acc[k][l];
    }
    benchmark::DoNotOptimize(sink);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 8 * kChains * kIters * threads * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_Fp64FmaPeak)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Reference)->Arg(4)->Arg(16)->Arg(64)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Naive)->Arg(16)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(3);

// Keeps each run's median GFLOP/s (or its only value) for the ratios.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> rate;
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const auto it = r.counters.find("GFLOP/s");
      if (it == r.counters.end()) continue;
      const std::string name = r.run_name.function_name + (r.run_name.args.empty() ? "" : "/" + r.run_name.args);
      if (r.aggregate_name.empty() || r.aggregate_name == "median") rate[name] = it->second;
    }
  }
};

}  // namespace
}  // namespace ctxscore

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  ctxscore::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const auto& r = reporter.rate;
  const auto get = [&r](const char* k) { const auto it = r.find(k); return it == r.end() ? NAN : it->second; };
  const double peak = get("BM_Fp64FmaPeak");
  std::printf("\nfp64 FMA peak (%d threads): %.1f GFLOP/s\n", omp_get_max_threads(), peak);
  for (const char* n : {"BM_Reference/4", "BM_Reference/16", "BM_Reference/64"})
    std::printf("%-16s %7.1f GFLOP/s  = %.2f of peak\n", n, get(n), get(n) / peak);
  std::printf("reference / naive loop at N=16: %.1fx (naive %.2f GFLOP/s)\n", get("BM_Reference/16") / get("BM_Naive/16"),
              get("BM_Naive/16"));
  return 0;
}

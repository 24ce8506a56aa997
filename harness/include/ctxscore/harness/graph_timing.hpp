// The one way a call is timed on a GPU, by the hip backend, the native port
// worker and the kernel benchmark alike (the Python worker does the same
// with torch's graphs; PROTOCOL.md, `time`): calls captured into one graph,
// call k on input set k mod sets so that no call finds its inputs in L2,
// the graph replayed, device events around each replay; the median replay
// over the calls it holds. Host launch latency is not in the figure. And
// the one way every GPU backend records a graph (capture_graph).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "platform.hpp"

namespace ctxscore::harness {

struct GraphTiming {
  double median_us = 0;  // per call
  int calls = 0;         // calls timed in all (replays × calls per graph)
  int calls_per_graph = 0;
  std::string method;  // how, in words, for reports
};

// Calls one graph holds: every input set once at least, and at least 16, so
// that a replay's own start is spread over many calls.
inline int graph_calls(int sets) { return std::max(sets, 16); }

namespace detail {
struct Events {
  hipEvent_t start = nullptr, stop = nullptr;
  Events() {
    check_hip(hipEventCreate(&start), "hipEventCreate");
    check_hip(hipEventCreate(&stop), "hipEventCreate");
  }
  ~Events() {
    (void)hipEventDestroy(start);
    (void)hipEventDestroy(stop);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  template <typename Body>
  double us(hipStream_t s, Body&& body) {
    check_hip(hipEventRecord(start, s), "hipEventRecord");
    body();
    check_hip(hipEventRecord(stop, s), "hipEventRecord");
    check_hip(hipEventSynchronize(stop), "hipEventSynchronize");
    float ms = 0;
    check_hip(hipEventElapsedTime(&ms, start, stop), "hipEventElapsedTime");
    return 1000.0 * ms;
  }
};
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace detail

// Records what `record()` enqueues on `s` into a graph. When `record`
// throws, the capture is ended and what it recorded dropped, so that the
// stream is usable again.
template <typename Record>
hipGraph_t capture_graph(hipStream_t s, Record&& record) {
  check_hip(hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal), "hipStreamBeginCapture");
  try {
    record();
  } catch (...) {
    hipGraph_t discarded = nullptr;
    (void)hipStreamEndCapture(s, &discarded);
    if (discarded) (void)hipGraphDestroy(discarded);
    throw;
  }
  hipGraph_t graph = nullptr;
  check_hip(hipStreamEndCapture(s, &graph), "hipStreamEndCapture");
  return graph;
}

// `enqueue(k)` puts call k (k < per_graph) on `s`, which the timing captures.
// At least `calls` calls are timed, in whole replays (3 at least), after
// 3 untimed ones.
template <typename Enqueue>
GraphTiming time_in_graph(hipStream_t s, int sets, int calls, Enqueue&& enqueue) {
  const int per_graph = graph_calls(sets);
  hipGraph_t graph = capture_graph(s, [&] {
    for (int k = 0; k < per_graph; ++k) enqueue(k);
  });
  hipGraphExec_t exec = nullptr;
  const hipError_t made = hipGraphInstantiateWithFlags(&exec, graph, 0);
  (void)hipGraphDestroy(graph);
  check_hip(made, "hipGraphInstantiateWithFlags(timing)");
  const auto replay = [&] { check_hip(hipGraphLaunch(exec, s), "hipGraphLaunch(timing)"); };
  GraphTiming t;
  try {
    for (int k = 0; k < 3; ++k) replay();
    detail::Events e;
    std::vector<double> us;
    const int replays = std::max(3, (calls + per_graph - 1) / per_graph);
    for (int r = 0; r < replays; ++r) us.push_back(e.us(s, replay) / per_graph);
    t = {detail::median(std::move(us)), replays * per_graph, per_graph,
         "one graph of " + std::to_string(per_graph) + " calls over " + std::to_string(sets) +
             " rotating input sets, device events around each of " + std::to_string(replays) + " replays"};
  } catch (...) {
    (void)hipGraphExecDestroy(exec);
    throw;
  }
  (void)hipGraphExecDestroy(exec);
  return t;
}

// The device's copy rate, read + write, in GB/s: the median of 5
// device-to-device copies of 1 GiB, timed with events. A property of the
// device, measured once per process by whoever reports it.
inline double device_copy_gb_per_s(hipStream_t s) {
  constexpr std::size_t kBytes = std::size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  check_hip(hipMalloc(&a, kBytes), "hipMalloc(copy rate)");
  const hipError_t got_b = hipMalloc(&b, kBytes);
  if (got_b != hipSuccess) (void)hipFree(a);
  check_hip(got_b, "hipMalloc(copy rate)");
  std::vector<double> us;
  try {
    detail::Events e;
    check_hip(hipMemsetAsync(a, 0, kBytes, s), "hipMemsetAsync(copy rate)");
    for (int k = 0; k < 5; ++k)
      us.push_back(e.us(s, [&] { check_hip(hipMemcpyAsync(b, a, kBytes, hipMemcpyDeviceToDevice, s), "hipMemcpyAsync"); }));
  } catch (...) {
    (void)hipFree(a);
    (void)hipFree(b);
    throw;
  }
  (void)hipFree(a);
  (void)hipFree(b);
  return 2.0 * static_cast<double>(kBytes) / detail::median(std::move(us)) * 1e-3;
}

}  // namespace ctxscore::harness

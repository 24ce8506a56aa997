// ctxscore-native-port LIBRARY [--name NAME]: serves a shared library that
// exports native_port.h's functions to the harness as a port
// (fixtures/PROTOCOL.md) over stdin and stdout. Libraries whose tensors live
// in GPU memory get device buffers from this worker (a build with a GPU
// runtime), and can be captured into a graph and replayed.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ctxscore/protocol.hpp"
#include "ctxscore/safetensors.hpp"
#include "native_port.h"
#if defined(CTXSCORE_NATIVE_PORT_GPU)
#include "ctxscore/harness/graph_timing.hpp"
#include "platform.hpp"
#endif

namespace {

namespace protocol = ctxscore::protocol;
using ctxscore::SafeTensors;
using ctxscore::StDType;
using ctxscore::StTensor;
using Bytes = std::vector<std::uint8_t>;

struct Library {
  const char* (*name)();
  int (*memory)();
  int (*score)(ctxscore_call*, char*, size_t);
  void (*release)(ctxscore_call*);
};

Library open_library(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw std::runtime_error(std::string("cannot load ") + path + ": " + dlerror());
  const auto sym = [&](const char* s) {
    void* f = dlsym(h, s);
    if (!f) throw std::runtime_error(path + " does not export " + s + " (tools/native_port.h)");
    return f;
  };
  Library l;
  l.name = reinterpret_cast<const char* (*)()>(sym("ctxscore_port_name"));
  l.memory = reinterpret_cast<int (*)()>(sym("ctxscore_port_memory"));
  l.score = reinterpret_cast<int (*)(ctxscore_call*, char*, size_t)>(sym("ctxscore_port_score"));
  l.release = reinterpret_cast<void (*)(ctxscore_call*)>(sym("ctxscore_port_release"));
  return l;
}

// The largest request the worker reads: far past any case's buffers, far
// below what eight bytes of text announce.
constexpr std::uint64_t kMaxRequestBytes = std::uint64_t{1} << 38;

bool read_exact(void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = read(0, c, n);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

void write_exact(const void* p, std::size_t n) {
  const auto* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = write(1, c, n);
    if (k <= 0) throw std::runtime_error("the harness closed stdout");
    c += k;
    n -= static_cast<std::size_t>(k);
  }
}

void send(const SafeTensors& st) {
  const Bytes b = ctxscore::encode_safetensors(st);
  const auto len = ctxscore::frame_length(b.size());
  write_exact(len.data(), len.size());
  write_exact(b.data(), b.size());
}

std::vector<std::int64_t> ints(const SafeTensors& m, const std::string& field) { return protocol::read_ints(m.metadata, field); }

const StTensor& tensor(const SafeTensors& m, const std::string& name) {
  const StTensor* t = m.find(name);
  if (!t) throw std::invalid_argument("request lacks tensor " + name);
  return *t;
}

// A storage in the library's memory kind.
class Storage {
 public:
  Storage(const StTensor& t, bool gpu) : gpu_(gpu), bytes_(t.bytes.size()) {
#if defined(CTXSCORE_NATIVE_PORT_GPU)
    if (gpu_) {
      ctxscore::check_hip(hipMalloc(&ptr_, bytes_ ? bytes_ : 1), "hipMalloc");
      fill(t);
      return;
    }
#endif
    host_ = t.bytes;
    if (host_.empty()) host_.resize(4);
    ptr_ = host_.data();
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
#if defined(CTXSCORE_NATIVE_PORT_GPU)
    if (gpu_ && ptr_) (void)hipFree(ptr_);
#endif
  }
  void fill(const StTensor& t) {
    if (t.bytes.size() != bytes_)
      throw std::invalid_argument("a storage of " + std::to_string(t.bytes.size()) + " bytes, the captured one has " +
                                  std::to_string(bytes_));
#if defined(CTXSCORE_NATIVE_PORT_GPU)
    if (gpu_) {
      ctxscore::check_hip(hipMemcpy(ptr_, t.bytes.data(), bytes_, hipMemcpyHostToDevice), "hipMemcpy(to device)");
      return;
    }
#endif
    std::memcpy(ptr_, t.bytes.data(), bytes_);
  }
  Bytes values() const {
    Bytes b(bytes_);
#if defined(CTXSCORE_NATIVE_PORT_GPU)
    if (gpu_) {
      ctxscore::check_hip(hipMemcpy(b.data(), ptr_, bytes_, hipMemcpyDeviceToHost), "hipMemcpy(to host)");
      return b;
    }
#endif
    if (bytes_) std::memcpy(b.data(), ptr_, bytes_);
    return b;
  }
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  bool gpu_;
  std::size_t bytes_;
  void* ptr_ = nullptr;
  Bytes host_;
};

ctxscore_tensor view(void* data, const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides) {
  ctxscore_tensor t{};
  t.data = data;
  t.ndim = static_cast<int>(shape.size());
  for (std::size_t d = 0; d < shape.size() && d < 3; ++d) {
    t.shape[d] = shape[d];
    t.strides[d] = strides.at(d);
  }
  return t;
}

std::vector<std::int64_t> dense_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

// One call's buffers and arguments, in the library's memory.
struct Call {
  std::unique_ptr<Storage> q, cache, table, lens, out;
  ctxscore_call c{};
  Call(const SafeTensors& m, bool gpu, void* stream) {
    q = std::make_unique<Storage>(tensor(m, "idx_q"), gpu);
    cache = std::make_unique<Storage>(tensor(m, "index_cache"), gpu);
    table = std::make_unique<Storage>(tensor(m, "block_table"), gpu);
    lens = std::make_unique<Storage>(tensor(m, "seq_lens"), gpu);
    c.idx_q = view(q->get(), ints(m, protocol::shape_field("idx_q")), ints(m, protocol::strides_field("idx_q")));
    const std::vector<std::int64_t> cache_shape = ints(m, protocol::shape_field("index_cache"));
    c.index_cache = view(cache->get(), cache_shape, dense_strides(cache_shape));
    c.block_table = view(table->get(), ints(m, protocol::shape_field("block_table")), ints(m, protocol::strides_field("block_table")));
    c.seq_lens = view(lens->get(), {tensor(m, "seq_lens").elements()}, {1});
    const protocol::CallScalars args = protocol::read_scalars(m.metadata);
    c.max_seq_len = args.max_seq_len;
    c.rank = args.rank;
    c.world_size = args.world_size;
    c.max_query_len = args.max_query_len;
    c.sm_scale = args.sm_scale;
    c.stream = stream;
    if (m.find("out")) {
      out = std::make_unique<Storage>(tensor(m, "out"), gpu);
      c.has_out = 1;
      c.out = view(out->get(), ints(m, protocol::shape_field("out")), ints(m, protocol::strides_field("out")));
    }
  }
  void refill(const SafeTensors& m) {
    q->fill(tensor(m, "idx_q"));
    cache->fill(tensor(m, "index_cache"));
    table->fill(tensor(m, "block_table"));
    lens->fill(tensor(m, "seq_lens"));
    out->fill(tensor(m, "out"));
  }
};

StTensor f32(const Bytes& b, std::vector<std::int64_t> shape) {
  StTensor t;
  t.dtype = StDType::f32;
  t.shape = std::move(shape);
  t.bytes = b;
  return t;
}

class Worker {
 public:
  Worker(Library lib, std::string name) : lib_(lib), name_(std::move(name)), gpu_(lib.memory() == 1) {
#if defined(CTXSCORE_NATIVE_PORT_GPU)
    if (gpu_) {
      int devices = 0;
      const hipError_t e = hipGetDeviceCount(&devices);
      if (e != hipSuccess || devices == 0)
        throw std::runtime_error(std::string("no GPU for a library whose tensors live in GPU memory: ") +
                                 (e != hipSuccess ? hipGetErrorString(e) : "0 devices"));
      ctxscore::check_hip(hipStreamCreate(&stream_), "hipStreamCreate");
    }
    c_stream_ = stream_;
#else
    if (gpu_) throw std::runtime_error("the library's tensors live in GPU memory, and this worker was built without a GPU runtime");
#endif
  }

  // The worker's compiler, and the runtime and device where the library's
  // tensors live in GPU memory. What built the library itself is its own.
  std::string toolchain() const {
#if defined(__clang__)
    std::string s = std::string("native worker built by clang ") + __clang_version__;
#else
    std::string s = std::string("native worker built by g++ ") + __VERSION__;
#endif
#if defined(CTXSCORE_NATIVE_PORT_GPU)
    if (gpu_) s += "; " + ctxscore::runtime_description();
#endif
    return s;
  }

  SafeTensors handle(const SafeTensors& m) {
    const std::string kind = protocol::kind_of(m.metadata);
    SafeTensors r;
    if (kind == protocol::kind::hello) {
      r.metadata = {{protocol::kMessage, protocol::kind::hello}, {"name", name_}, {"supports", gpu_ ? "score,time,capture" : "score,time"},
                    {"protocol", std::to_string(ctxscore::kProtocolVersion)}, {"toolchain", toolchain()}};
    } else if (kind == protocol::kind::score) {
      Call call(m, gpu_, c_stream_);
      const auto t0 = std::chrono::steady_clock::now();
      run(call.c);
#if defined(CTXSCORE_NATIVE_PORT_GPU)
      if (gpu_) ctxscore::check_hip(hipDeviceSynchronize(), "the library's call");
#endif
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      r = scores(call);
      r.metadata["call_seconds"] = std::to_string(seconds);
    } else if (kind == protocol::kind::capture) {
      capture(m);
      r.metadata = {{protocol::kMessage, protocol::kind::captured}};
    } else if (kind == protocol::kind::time) {
      r = time(m);
    } else if (kind == protocol::kind::replay) {
      r = replay(m);
    } else {
      throw std::invalid_argument("unknown request \"" + kind + "\"");
    }
    return r;
  }

 private:
  void run(ctxscore_call& c) {
    char error[1024] = "";
    if (lib_.score(&c, error, sizeof error) != 0) throw std::runtime_error(error[0] ? error : "the library failed");
  }
  // The median time of one call, and the copy rate: for a GPU library the
  // graph timing every GPU backend shares (graph_timing.hpp), over copies
  // of the inputs that together exceed the L2 cache; the host's steady
  // clock around each call otherwise.
  SafeTensors time(const SafeTensors& m) {
    const int calls = m.metadata.count("calls") ? std::stoi(m.metadata.at("calls")) : 0;
    if (calls < 1) throw std::invalid_argument("`time` needs calls >= 1");
    double median_us = 0;
    int timed = calls;
    std::string method = "host steady clock around each call";
    if (!gpu_) {
      Call call(m, gpu_, c_stream_);
      run(call.c);  // warm-up
      std::vector<double> us;
      for (int k = 0; k < calls; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        run(call.c);
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(us.begin(), us.end());
      median_us = us[us.size() / 2];
      if (copy_gb_per_s_ == 0) copy_gb_per_s_ = host_copy_gb_per_s();
    }
#if defined(CTXSCORE_NATIVE_PORT_GPU)
    if (gpu_) {
      constexpr std::size_t kPastL2 = std::size_t{256} << 20, kAtMost = std::size_t{8} << 30;
      std::vector<std::unique_ptr<Call>> sets;
      for (std::size_t bytes = 0; sets.empty() || (bytes < kPastL2 && 2 * bytes <= kAtMost);) {
        sets.push_back(std::make_unique<Call>(m, gpu_, c_stream_));
        const Call& c = *sets.back();
        bytes += c.q->bytes() + c.cache->bytes() + c.table->bytes() + c.lens->bytes() + (c.out ? c.out->bytes() : 0);
      }
      for (const auto& c : sets) run(c->c);  // warm-up
      const ctxscore::harness::GraphTiming t = ctxscore::harness::time_in_graph(
          stream_, static_cast<int>(sets.size()), calls, [&](int k) { run(sets[static_cast<std::size_t>(k) % sets.size()]->c); });
      median_us = t.median_us;
      timed = t.calls;
      method = t.method;
      if (copy_gb_per_s_ == 0) copy_gb_per_s_ = ctxscore::harness::device_copy_gb_per_s(stream_);
    }
#endif
    SafeTensors r;
    r.metadata = {{protocol::kMessage, protocol::kind::timing}, {"median_us", std::to_string(median_us)}, {"calls", std::to_string(timed)},
                  {"method", method}, {"copy_gb_per_s", std::to_string(copy_gb_per_s_)}};
    return r;
  }
  // Median of 5 copies of 256 MiB in host memory, read + write.
  static double host_copy_gb_per_s() {
    constexpr std::size_t kCopyBytes = std::size_t{256} << 20;
    std::vector<char> a(kCopyBytes, 1), b(kCopyBytes);
    std::vector<double> us;
    for (int k = 0; k < 5; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      std::memcpy(b.data(), a.data(), kCopyBytes);
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      a[static_cast<std::size_t>(k)] = b[static_cast<std::size_t>(k) + 1];  // the copies are used: none is elided
    }
    std::sort(us.begin(), us.end());
    return 2.0 * kCopyBytes / us[us.size() / 2] * 1e-3;
  }

  SafeTensors scores(Call& call) {
    SafeTensors r;
    r.metadata = {{protocol::kMessage, protocol::kind::scores}};
    if (call.out) {
      const Bytes out = call.out->values();
      r.tensors.emplace_back("out", f32(out, {static_cast<std::int64_t>(out.size() / 4)}));
    }
    if (call.c.fresh) {
      const std::int64_t n = call.c.fresh_shape[0] * call.c.fresh_shape[1] * call.c.fresh_shape[2];
      Bytes b(static_cast<std::size_t>(n) * 4);
#if defined(CTXSCORE_NATIVE_PORT_GPU)
      if (gpu_) {
        if (n) ctxscore::check_hip(hipMemcpy(b.data(), call.c.fresh, b.size(), hipMemcpyDeviceToHost), "hipMemcpy(fresh)");
      } else
#endif
        if (n) std::memcpy(b.data(), call.c.fresh, b.size());
      lib_.release(&call.c);
      r.tensors.emplace_back("fresh", f32(b, {call.c.fresh_shape[0], call.c.fresh_shape[1], call.c.fresh_shape[2]}));
    }
    return r;
  }
  void capture(const SafeTensors& m) {
#if defined(CTXSCORE_NATIVE_PORT_GPU)
    if (!gpu_) throw std::invalid_argument("capture needs a library whose tensors live in GPU memory");
    captured_ = std::make_unique<Call>(m, gpu_, c_stream_);
    if (exec_) (void)hipGraphExecDestroy(exec_);
    exec_ = nullptr;
    hipGraph_t graph = ctxscore::harness::capture_graph(stream_, [&] { run(captured_->c); });
    ctxscore::check_hip(hipGraphInstantiateWithFlags(&exec_, graph, 0), "hipGraphInstantiateWithFlags");
    (void)hipGraphDestroy(graph);
#else
    (void)m;
    throw std::invalid_argument("capture needs a worker built with a GPU runtime");
#endif
  }
  // Between capture and replay, as a serving process does: device memory
  // allocated, filled with NaN bytes and freed again, so that a library whose
  // graph keeps a pointer to memory it freed reads poison on replay.
  static void disturb_allocator() {
#if defined(CTXSCORE_NATIVE_PORT_GPU)
    for (const std::size_t bytes : {std::size_t{1} << 12, std::size_t{1} << 20, std::size_t{64} << 20}) {
      void* p = nullptr;
      ctxscore::check_hip(hipMalloc(&p, bytes), "hipMalloc(allocator disturbance)");
      ctxscore::check_hip(hipMemset(p, 0xFF, bytes), "hipMemset(allocator disturbance)");
      ctxscore::check_hip(hipFree(p), "hipFree(allocator disturbance)");
    }
#endif
  }
  SafeTensors replay(const SafeTensors& m) {
#if defined(CTXSCORE_NATIVE_PORT_GPU)
    if (!captured_) throw std::invalid_argument("replay before any capture");
    disturb_allocator();
    captured_->refill(m);
    ctxscore::check_hip(hipGraphLaunch(exec_, stream_), "hipGraphLaunch");
    ctxscore::check_hip(hipStreamSynchronize(stream_), "replay");
    return scores(*captured_);
#else
    (void)m;
    throw std::invalid_argument("replay needs a worker built with a GPU runtime");
#endif
  }

  Library lib_;
  std::string name_;
  bool gpu_;
  void* c_stream_ = nullptr;  // what the library is given
  double copy_gb_per_s_ = 0;  // the machine's, measured by the first `time`
  std::unique_ptr<Call> captured_;
#if defined(CTXSCORE_NATIVE_PORT_GPU)
  hipStream_t stream_ = nullptr;
  hipGraphExec_t exec_ = nullptr;
#endif
};

// The bytes of memory this machine can still give (MemAvailable + SwapFree);
// nullopt where /proc/meminfo does not say.
std::optional<std::uint64_t> available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0, total = 0;
  int found = 0;
  while (in >> key >> kib) {
    if (key == "MemAvailable:" || key == "SwapFree:") {
      total += kib * 1024;
      ++found;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  if (found != 2) return std::nullopt;
  return total;
}

constexpr const char* kRequest = "the harness's request";

// A request's `n` bytes, its document's header read first: a frame that is
// not exactly the tensors its header declares, or that declares a tensor no
// call holds (kCallTensors, each 1-D), is refused before its body is
// allocated.
Bytes read_request_body(std::uint64_t n) {
  if (const auto available = available_memory(); available && n > *available)
    throw std::runtime_error("a request of " + std::to_string(n) + " bytes announced, more than the " +
                             std::to_string(*available) + " bytes of memory this machine has available (MemAvailable + SwapFree)");
  if (n < 8)
    throw ctxscore::FixtureError(kRequest, "header length", "a message of " + std::to_string(n) + " bytes, the length field alone needs 8");
  Bytes body(8);
  if (!read_exact(body.data(), 8)) throw std::runtime_error("the harness closed stdin mid-message");
  std::uint64_t h = 0;
  for (int b = 0; b < 8; ++b) h |= static_cast<std::uint64_t>(body[static_cast<std::size_t>(b)]) << (8 * b);
  ctxscore::check_header_length(h, n, kRequest);
  body.resize(static_cast<std::size_t>(8 + h));
  if (!read_exact(body.data() + 8, static_cast<std::size_t>(h))) throw std::runtime_error("the harness closed stdin mid-message");
  const ctxscore::StLayout layout = ctxscore::read_safetensors_header(body.data() + 8, static_cast<std::size_t>(h), n - 8 - h, kRequest);
  std::string storages;
  for (const char* k : ctxscore::kCallTensors) storages += std::string(storages.empty() ? "" : ", ") + k;
  for (const auto& [name, entry] : layout.tensors) {
    const bool storage = std::any_of(std::begin(ctxscore::kCallTensors), std::end(ctxscore::kCallTensors),
                                     [&name = name](const char* k) { return name == k; });
    if (!storage) throw ctxscore::FixtureError(kRequest, name, "unexpected tensor, expected only the call's storages (" + storages + ")");
    if (entry.shape.size() != 1)
      throw ctxscore::FixtureError(kRequest, name, "rank " + std::to_string(entry.shape.size()) + ", expected a 1-D storage");
  }
  body.resize(static_cast<std::size_t>(n));
  if (!read_exact(body.data() + 8 + h, static_cast<std::size_t>(n - 8 - h))) throw std::runtime_error("the harness closed stdin mid-message");
  return body;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc == 3 || argc > 4 || (argc == 4 && std::strcmp(argv[2], "--name") != 0)) {
    std::fprintf(stderr, "usage: %s LIBRARY [--name NAME]\n", argv[0]);
    return 2;
  }
  try {
    const Library lib = open_library(argv[1]);
    Worker worker(lib, argc == 4 ? argv[3] : lib.name());
    for (;;) {
      std::uint8_t len[ctxscore::kFrameLengthBytes];
      if (!read_exact(len, sizeof len)) return 0;  // the harness is done
      const std::uint64_t n = ctxscore::frame_length(len);
      if (n > kMaxRequestBytes)
        throw std::runtime_error("a request of " + std::to_string(n) + " bytes announced, more than the " +
                                 std::to_string(kMaxRequestBytes) + " a request may have (is stdin the port protocol?)");
      const Bytes body = read_request_body(n);
      const SafeTensors request = ctxscore::decode_safetensors(body.data(), body.size(), kRequest);
      if (protocol::kind_of(request.metadata) == protocol::kind::bye) {
        SafeTensors bye;
        bye.metadata = {{protocol::kMessage, protocol::kind::bye}};
        send(bye);
        return 0;
      }
      try {
        send(worker.handle(request));
      } catch (const std::exception& e) {  // the library (or the request) failed: the harness judges it
        SafeTensors err;
        err.metadata = {{protocol::kMessage, protocol::kind::error}, {"reason", e.what()}};
        send(err);
      }
    }
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ctxscore-native-port: out of memory for a request\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ctxscore-native-port: %s\n", e.what());
    return 2;
  }
}

// The port backend: a child process spoken to over fixtures/PROTOCOL.md.
// Whatever the child does (crash, hang, exit mid-message, send garbage), the
// harness gets a BackendError naming it, the child is killed and reaped,
// and the next call starts a fresh one.
#include "ctxscore/harness/port.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "ctxscore/harness/phases.hpp"
#include "ctxscore/safetensors.hpp"
#include "port_messages.hpp"
#include "port_process.hpp"

namespace ctxscore::harness {

namespace {

using namespace port_process;
using namespace port_messages;

// A reply's safetensors header (its JSON, names and metadata) beyond its
// tensors' bytes: a request's reply may announce at most its tensors plus this.
constexpr std::uint64_t kReplyHeaderAllowance = std::uint64_t{1} << 20;

// The most bytes a `scores` reply to a call of `host` in `mode` can hold:
// the out storage it was given (when given) and fresh [H, T, L] fp32 scores.
std::uint64_t scores_reply_bound(const HostCase& host, OutMode mode) {
  const Case& c = host.spec;
  const std::uint64_t fresh = static_cast<std::uint64_t>(c.heads) * static_cast<std::uint64_t>(c.tokens()) *
                              static_cast<std::uint64_t>(std::max<std::int64_t>(c.local(), 0)) * 4;
  const std::uint64_t out = mode == OutMode::absent ? 0 : static_cast<std::uint64_t>(host.out.size()) * 4;
  return out + fresh + kReplyHeaderAllowance;
}

// The --port-timeout and --port-startup-timeout flags; 0 when not given.
double& timeout_flag() {
  static double t = 0;
  return t;
}
double& startup_flag() {
  static double t = 0;
  return t;
}


class PortBackend : public Backend, public PortBackendApi {
 public:
  explicit PortBackend(std::string command) : command_(std::move(command)) {
    port_timeout_seconds();  // a malformed setting is the caller's error, named before any port runs
    port_startup_timeout_seconds();
    start();
  }

  std::string name() const override { return "port"; }
  std::string port_name() override { return port_name_; }
  std::string toolchain() const override {
    return toolchain_.empty() ? "not reported by the port (its hello names no toolchain)" : toolchain_;
  }
  Oracle oracle() const override { return Oracle::reference; }
  gen::CaseLimits fuzz_limits() const override { return gen::named_limits(case_size()); }  // a port launches its own geometry
  // A port on the host would take minutes a case at the GPU's sizes.
  std::string case_size() const override { return device_ == "cpu" ? "small" : "large"; }
  std::string replay_flags() const override { return "--port " + shell_quoted(command_); }
  bool supports(const std::string& what) override {
    ensure_started();
    return supports_.find("," + what + ",") != std::string::npos;
  }

  Scored score(HostCase& host, OutMode mode) override {
    const SafeTensors request = call_message(protocol::kind::score, host, mode, host.spec.max_seq_len);
    // An `error` reply carries the call's storages back (PROTOCOL.md): at most what was sent.
    std::uint64_t sent = kReplyHeaderAllowance;
    for (const auto& [name, t] : request.tensors) sent += t.bytes.size();
    const SafeTensors reply = exchange(request, protocol::kind::scores, std::max(scores_reply_bound(host, mode), sent));
    return scores_of(reply, host, mode);
  }

  std::unique_ptr<CapturedScore> capture(HostCase& dummy, std::int64_t captured_bound) override;

  Capabilities state_capabilities() override {
    Capabilities c = Backend::state_capabilities();
    c.places_tensors = false;
    if (!supports("refuse"))
      c.refusals = "the port's hello does not offer `refuse` (PROTOCOL.md): it cannot be handed a call that breaks the contract";
    if (supports("geometry")) c.geometry.clear();
    return c;
  }

  // An `error` reply to a `score` carries the storages as the failed call
  // left them (PROTOCOL.md): what shows that a refusal wrote nothing.
  CallOutcome call(RawCall& c) override {
    std::uint64_t bound = kReplyHeaderAllowance;
    for (int k = 0; k < 5; ++k) bound += call_tensor(c, k).bytes.size();
    const std::int64_t heads = std::max<std::int64_t>(c.idx_q.view.shape[1], 0);
    bound += static_cast<std::uint64_t>(heads * c.idx_q.view.shape[0] * local_slots(global_blocks(std::max<std::int64_t>(c.max_seq_len, 1)), std::max<std::int64_t>(c.world, 1))) * 4;
    const SafeTensors reply = exchange(raw_message(c), protocol::kind::scores, bound, true);
    CallOutcome o;
    o.refused = protocol::kind_of(reply.metadata) == protocol::kind::error;
    o.fresh = reply.find("fresh") != nullptr;
    if (o.refused) {
      const auto why = reply.metadata.find("reason");
      o.reason = why == reply.metadata.end() ? "(no reason given)" : printable(why->second).substr(0, 1000);
    }
    for (const auto& [name, t] : reply.tensors)
      if (name != "fresh" && std::find(std::begin(kCallTensors), std::end(kCallTensors), name) == std::end(kCallTensors))
        fail("replied with an unexpected tensor `" + name + "`");
    for (int k = 0; k < 5; ++k) {
      if (!o.refused && k < 4) continue;  // a `scores` reply carries out only
      RawTensor& t = call_tensor(c, k);
      const StTensor* got = reply.find(kCallTensors[k]);
      if (!got)
        fail(std::string("answered `") + (o.refused ? "error" : "scores") + "` without the " + kCallTensors[k] +
             " storage (an error to a `score` carries every storage as the call left it)");
      if (got->dtype != wire_dtype(t.view.dtype) || got->bytes.size() != t.bytes.size())
        fail(std::string("replied with ") + kCallTensors[k] + " " + st_dtype_name(got->dtype) + " of " +
             std::to_string(got->bytes.size()) + " bytes, expected " + st_dtype_name(wire_dtype(t.view.dtype)) + " of " +
             std::to_string(t.bytes.size()) + " (the storage it was given)");
      t.bytes = got->bytes;
    }
    return o;
  }

  // The port times itself on its device (PROTOCOL.md, `time`).
  Timing time(HostCase& host, int calls) override {
    if (!supports(protocol::kind::time)) fail("does not answer `time` (its hello's `supports` lacks it)");
    SafeTensors req = call_message(protocol::kind::time, host, OutMode::given, host.spec.max_seq_len);
    req.metadata["calls"] = std::to_string(calls);
    const auto asked = std::chrono::steady_clock::now();
    const SafeTensors reply = exchange(req, protocol::kind::timing, kReplyHeaderAllowance);
    const double waited_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - asked).count();
    const auto number = [&](const char* key, double lo, bool above) {
      const auto it = reply.metadata.find(key);
      if (it == reply.metadata.end()) fail(std::string("reply `timing` lacks ") + key);
      char* end = nullptr;
      const double v = std::strtod(it->second.c_str(), &end);
      if (it->second.empty() || *end != '\0' || !std::isfinite(v) || v < lo || (above && v == lo))
        fail(std::string("reply `timing`: ") + key + " = \"" + printable(it->second) + "\", expected a finite number " +
             (above ? "> " : ">= ") + protocol::decimal(lo));
      return v;
    };
    Timing t;
    t.median_us = number("median_us", 0.0, true);
    t.calls = static_cast<std::int64_t>(number("calls", calls, false));
    t.copy_gb_per_s = number("copy_gb_per_s", 0.0, true);
    // At least half the timed calls took the median or longer, and all of
    // them ran while the harness waited: figures that do not fit in the
    // wait are not a measurement.
    const double least_us = std::ceil(static_cast<double>(t.calls) / 2) * t.median_us;
    if (least_us > 1.1 * waited_us + 1000.0)
      fail("reply `timing`: " + std::to_string(t.calls) + " calls at a median of " + protocol::decimal(t.median_us) +
           " us take at least " + protocol::decimal(least_us * 1e-6) + " s, expected no more than the " + protocol::decimal(waited_us * 1e-6) +
           " s the reply took");
    const auto method = reply.metadata.find("method");
    t.method = method == reply.metadata.end() ? "not said" : printable(method->second).substr(0, 200);
    return t;
  }

  PortGeometry geometry(std::int64_t batch, std::int64_t max_seq_len, std::int64_t world, std::int64_t heads,
                        std::int64_t query_len) override {
    SafeTensors req;
    req.metadata = {{protocol::kMessage, protocol::kind::geometry}, {"batch", std::to_string(batch)}, {"max_seq_len", std::to_string(max_seq_len)},
                    {"world_size", std::to_string(world)}, {"heads", std::to_string(heads)},
                    {"max_query_len", std::to_string(query_len)}};
    const SafeTensors reply = exchange(req, protocol::kind::geometry, kReplyHeaderAllowance);
    PortGeometry g;
    try {
      g.chunk_count = protocol::read_int(reply.metadata, "chunk_count");
      g.chunk = protocol::read_int(reply.metadata, "chunk");
      g.grid_x = protocol::read_int(reply.metadata, "grid_x");
      g.grid_y = protocol::read_int(reply.metadata, "grid_y");
    } catch (const std::invalid_argument& e) {
      fail(std::string("reply `geometry`: ") + printable(e.what()));
    }
    return g;
  }

  // Sends one request, returns the reply of kind `want` (an `error` reply
  // becomes a BackendError with the port's message, or is returned when
  // `error_is_reply`). Any failure kills the
  // child; the next request starts a new one.
  SafeTensors exchange(const SafeTensors& request, const std::string& want, std::uint64_t max_reply_bytes,
                       bool error_is_reply = false) {
    ensure_started();
    const PhaseClock clock(Phase::transfer);
    const auto sent = std::chrono::steady_clock::now();
    std::string reported;
    try {
      const Deadline deadline = Deadline::in(port_timeout_seconds());
      child_->send(encode_safetensors(request), deadline);
      const Bytes raw = child_->receive(deadline, max_reply_bytes);
      SafeTensors reply;
      try {
        reply = decode_safetensors(raw.data(), raw.size(), "the port's reply");
      } catch (const FixtureError& e) {
        fail(std::string("sent a reply that is no safetensors document: ") + e.what());
      }
      const auto kind = reply.metadata.find(protocol::kMessage);
      if (kind == reply.metadata.end()) fail("sent a reply without a \"message\" kind");
      // The port's own time for the call, inside the wait charged to transfer
      // (PROTOCOL.md); a port that overstates it moves no more than this wait.
      if (const auto call = reply.metadata.find("call_seconds"); call != reply.metadata.end()) {
        char* end = nullptr;
        const double seconds = std::strtod(call->second.c_str(), &end);
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
        if (!call->second.empty() && *end == '\0' && std::isfinite(seconds) && seconds >= 0)
          recharge(Phase::transfer, Phase::implementation, std::min(seconds, waited));
      }
      if (kind->second == protocol::kind::error && error_is_reply) {
        return reply;
      } else if (kind->second == protocol::kind::error) {
        const auto why = reply.metadata.find("reason");
        reported = why != reply.metadata.end() ? why->second : std::string("(no reason given)");
      } else if (kind->second != want) {
        fail("replied `" + kind->second + "` to `" + protocol::kind_of(request.metadata) + "`, expected `" + want + "`");
      } else {
        return reply;
      }
    } catch (const BackendError&) {
      if (child_) last_state_ = child_->state();
      child_.reset();
      throw;
    }
    // The port is well and said why it could not: it stays.
    throw BackendError("port " + port_name_ + " reported an error: " + reported);
  }

  [[noreturn]] void fail(const std::string& what) {
    throw BackendError("port " + (port_name_.empty() ? shell_quoted(command_) : port_name_) + " " + what);
  }

  Scored scores_of(const SafeTensors& reply, const HostCase& host, OutMode mode) {
    const Case& c = host.spec;
    Scored s;
    for (const auto& [name, t] : reply.tensors)
      if (name != "out" && name != "fresh") fail("replied with an unexpected tensor `" + name + "` (expected out, fresh)");
    const StTensor* out = reply.find("out");
    if (mode != OutMode::absent) {
      if (!out) fail("replied without the out storage it was given");
      if (out->dtype != StDType::f32 || out->shape != std::vector<std::int64_t>{static_cast<std::int64_t>(host.out.size())})
        fail(std::string("replied with out ") + st_dtype_name(out->dtype) + " [" + protocol::join_ints(out->shape) + "], expected F32 [" +
             std::to_string(host.out.size()) + "] (the storage it was given)");
      s.out.resize(host.out.size());
      std::memcpy(s.out.data(), out->bytes.data(), out->bytes.size());
    } else if (out) {
      fail("replied with an out storage to a call that passed none");
    }
    if (const StTensor* fresh = reply.find("fresh")) {
      const std::vector<std::int64_t> want{c.heads, c.tokens(), c.local()};
      if (fresh->dtype != StDType::f32 || fresh->shape != want)
        fail(std::string("replied with fresh scores ") + st_dtype_name(fresh->dtype) + " [" + protocol::join_ints(fresh->shape) +
             "], expected F32 [" + protocol::join_ints(want) + "] = [H, T, L]");
      std::vector<float> v(fresh->bytes.size() / 4);
      if (!v.empty()) std::memcpy(v.data(), fresh->bytes.data(), fresh->bytes.size());
      s.fresh = std::move(v);
    }
    return s;
  }

 private:
  void ensure_started() {
    if (!child_) start();
  }
  void start() {
    child_ = std::make_unique<Child>(command_);
    SafeTensors hello;
    hello.metadata = {{protocol::kMessage, protocol::kind::hello}, {"protocol", std::to_string(kProtocolVersion)}};
    try {
      const Deadline deadline = Deadline::in(port_startup_timeout_seconds());  // start-up has a limit of its own
      child_->send(encode_safetensors(hello), deadline);
      const Bytes raw = child_->receive(deadline, kReplyHeaderAllowance);
      const SafeTensors reply = decode_safetensors(raw.data(), raw.size(), "the port's hello");
      if (protocol::kind_of(reply.metadata) != protocol::kind::hello)
        throw BackendError("port " + shell_quoted(command_) + " did not answer `hello` with `hello`");
      const auto protocol = reply.metadata.find("protocol");
      if (protocol != reply.metadata.end() && protocol->second != std::to_string(kProtocolVersion))
        throw BackendError("port " + shell_quoted(command_) + " speaks protocol \"" + protocol->second +
                           "\", expected \"" + std::to_string(kProtocolVersion) + "\"");
      port_name_ = reply.metadata.count("name") ? reply.metadata.at("name") : command_;
      supports_ = "," + (reply.metadata.count("supports") ? reply.metadata.at("supports") : std::string("score")) + ",";
      toolchain_ = reply.metadata.count("toolchain") ? printable(reply.metadata.at("toolchain")).substr(0, 1000) : "";
      device_ = reply.metadata.count("device") ? reply.metadata.at("device") : "";
    } catch (const FixtureError& e) {
      const std::string state = child_->state();
      child_.reset();
      throw BackendError("port " + shell_quoted(command_) + " sent a hello that is no safetensors document: " + e.what() + "; " + state);
    } catch (const BackendError& e) {
      child_->await_end(2.0);  // its status (69: no device) says more than the broken pipe
      const bool unavailable = child_->exited_with(kDeviceUnavailableExit);
      child_.reset();
      if (unavailable) throw Unavailable{std::string("port ") + shell_quoted(command_) + " cannot open its device: " + e.what()};
      throw BackendError(std::string("port ") + shell_quoted(command_) + " did not start: " + e.what());
    }
  }

  std::string command_, port_name_, supports_, last_state_, toolchain_, device_;
  std::unique_ptr<Child> child_;
  friend class PortCapture;
};

class PortCapture : public CapturedScore {
 public:
  PortCapture(PortBackend& port, const HostCase& dummy) : port_(port), spec_(dummy.spec) {}
  Scored replay(HostCase& real) override {
    const SafeTensors reply = port_.exchange(call_message(protocol::kind::replay, real, OutMode::given, spec_.max_seq_len), protocol::kind::scores,
                                             scores_reply_bound(real, OutMode::given));
    return port_.scores_of(reply, real, OutMode::given);
  }

 private:
  PortBackend& port_;
  Case spec_;
};

std::unique_ptr<CapturedScore> PortBackend::capture(HostCase& dummy, std::int64_t captured_bound) {
  if (!supports(protocol::kind::capture)) return nullptr;
  exchange(call_message(protocol::kind::capture, dummy, OutMode::given, captured_bound), protocol::kind::captured, kReplyHeaderAllowance);
  return std::make_unique<PortCapture>(*this, dummy);
}

}  // namespace

namespace {

// The flag, else $env (strictly parsed), else the default.
double seconds_setting(double flag, const char* env_name, double fallback) {
  if (flag > 0) return flag;
  if (const char* env = std::getenv(env_name); env && *env) {
    const std::optional<double> v = positive_seconds(env);
    if (!v)
      throw std::invalid_argument(std::string(env_name) + " = \"" + printable(env) + "\", expected a positive, finite number of seconds");
    return *v;
  }
  return fallback;
}

}  // namespace

double port_timeout_seconds() { return seconds_setting(timeout_flag(), "CTXSCORE_PORT_TIMEOUT", 60); }
void set_port_timeout_seconds(double seconds) { timeout_flag() = seconds; }
double port_startup_timeout_seconds() { return seconds_setting(startup_flag(), "CTXSCORE_PORT_STARTUP_TIMEOUT", 120); }
void set_port_startup_timeout_seconds(double seconds) { startup_flag() = seconds; }

std::unique_ptr<Backend> make_port_backend(const std::string& command) { return std::make_unique<PortBackend>(command); }

PortBackendApi* as_port(Backend& b) { return dynamic_cast<PortBackendApi*>(&b); }

}  // namespace ctxscore::harness

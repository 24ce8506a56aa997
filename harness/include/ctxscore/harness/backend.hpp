// The implementations the harness judges, behind one interface. A backend
// takes a materialized case and how `out` is passed, runs the operator, and
// returns what it wrote; every judgement (the oracle, compare, the failure
// fixture) stays on the harness's side (judge.hpp). Backends are entries of
// one registry: the reference, the in-process HIP kernel, and ports
// (implementations in other processes, any language).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ctxscore/case.hpp"
#include "ctxscore/harness/case_limits.hpp"
#include "ctxscore/harness/out_mode.hpp"
#include "ctxscore/harness/refusals.hpp"
#include "ctxscore/safetensors.hpp"
#include "ctxscore/wire_format.hpp"
#include "ctxscore/score.hpp"

namespace ctxscore::harness {

// The out a too-small call passes: the case's allocation with L − 1 slots
// (L >= 1 always: S >= 1).
TensorRef too_small(const TensorRef& given, std::int64_t local_slots);

// What one call gave back.
struct Scored {
  std::vector<float> out;                   // the given allocation after the call; empty when none was given
  std::optional<std::vector<float>> fresh;  // the scorer's own dense [H, T, L] buffer, when it made one
  std::string shape;                        // how it ran (the kernel: teams × ring pages / rows read), for counts
};

// The scores a call wrote, dense [H, T, L]: from the given out allocation
// through the case's layout, or the fresh buffer. Unwritten elements are NaN.
// Throws BackendError (declared below) when `s` has the wrong size.
std::vector<float> written_scores(const Scored& s, const HostCase& host);

// A backend that misbehaved (as opposed to one that scored wrongly): it
// crashed, hung, broke its protocol or returned something of the wrong kind.
class BackendError : public std::runtime_error {
 public:
  explicit BackendError(const std::string& what) : std::runtime_error(spelled_nul(what)) {}
};

// A backend that did not answer within its time limit (a port that hung):
// a verdict records it as such, and a campaign does not shrink it (each
// step would cost a timeout).
class BackendHung : public BackendError {
 public:
  using BackendError::BackendError;
};

// The machine lacks what a backend needs (a port exited with
// kDeviceUnavailableExit before its hello: its device cannot be opened).
// An error of the environment, never a verdict on the implementation: like
// Interrupted it is no std::exception, so no handler turns it into one.
struct Unavailable {
  std::string what;
};
using ::ctxscore::kDeviceUnavailableExit;  // wire_format.json's

// How long one call takes, as the backend measures it (`ctxscore bench`).
struct Timing {
  double median_us = 0;       // per call, the median over the timed calls
  std::int64_t calls = 0;     // calls timed
  std::string method;         // how, in words
  double copy_gb_per_s = 0;   // the device's copy rate (bytes read and written per second), 0 when not measured
};

// Which scorer a backend's output is judged against.
enum class Oracle { reference, plain_loop };
const char* oracle_name(Oracle o);
// The oracle's scores of a materialized case (its `out` left alone; the
// reference reads the buffers through mutable arguments).
ShardScores oracle_scores(Oracle o, HostCase& host);

// A graph recorded once on a dummy batch into persistent buffers; each
// replay refills those buffers with a batch of the same layout.
class CapturedScore {
 public:
  virtual ~CapturedScore() = default;
  // Refills the captured buffers with `real`, replays, returns the out allocation.
  virtual Scored replay(HostCase& real) = 0;
};

// What a backend can be asked beyond a plain call, stated once: each reason
// empty where it can, else why it cannot. The checks' needs are matched
// against it (checks.hpp), and a check that needs what a backend lacks is
// not run, with the reason.
struct Capabilities {
  std::string capture;   // record a graph on a dummy batch and replay it (a one-token probe says)
  std::exception_ptr capture_raised;  // the probe's exception where it raised: the capture check reports it
  std::string refusals;  // be handed a call that breaks the contract (§7)
  std::string geometry;  // answer `geometry` (the launch geometry, §6)
  bool places_tensors = true;  // be handed tensors on different devices (a port's protocol names none)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Oracle oracle() const = 0;
  // Case sizes that keep the backend and its oracle in pace.
  virtual gen::CaseLimits fuzz_limits() const = 0;
  // The named case size (case_limits.hpp) of fuzz_limits(), which a run
  // takes when it names none; empty where the backend's limits are its own.
  virtual std::string case_size() const { return ""; }
  // Runs one call on buffers laid out as `host` describes; `host.out` holds
  // the sentinel. Throws BackendError when the backend misbehaves,
  // ContractError when it rejects the arguments.
  virtual Scored score(HostCase& host, OutMode mode) = 0;
  // Runs the operator on any call, valid or not (refusals.hpp); `call`'s
  // storages receive what the call left in them. A refusal is an outcome,
  // not an exception; throws BackendError when the backend misbehaves.
  virtual CallOutcome call(RawCall& call) = 0;
  // What this backend can be asked, stated on the first call and kept.
  const Capabilities& capabilities();
  // Graph capture: nullptr when the backend cannot record one. `captured_bound`
  // is the S the capture is made with (the dummy's own lengths must not size it).
  virtual std::unique_ptr<CapturedScore> capture(HostCase& dummy, std::int64_t captured_bound);
  // Times `calls` calls on buffers laid out as `host` describes, out given.
  // The base times each call on the host's wall clock; a GPU backend or a
  // port measures on its device.
  virtual Timing time(HostCase& host, int calls);
  // The command-line flags that select this backend again (a replay line).
  virtual std::string replay_flags() const { return "--backend " + name(); }
  // What built the implementation and what it runs on (compiler, libraries,
  // runtime, device), one line: every report and failure fixture records it.
  virtual std::string toolchain() const = 0;

 protected:
  // The base: capture as a one-token probe finds it, refusals and placement
  // taken, no geometry. A backend states what differs.
  virtual Capabilities state_capabilities();

 private:
  std::optional<Capabilities> capabilities_;
};

// The compiler that built this process's host code, as a toolchain line.
std::string host_toolchain();

struct BackendEntry {
  std::string name;
  std::string describe;                      // one line
  std::function<std::string()> unavailable;  // why it cannot run here; empty when it can
  std::function<std::unique_ptr<Backend>(const std::string& argument)> make;
  bool takes_argument = false;  // a port's command line
};

// reference (oracle: the plain-loop scorer), hip (the kernel; oracle: the
// reference), port (a process speaking the port protocol; oracle: the reference).
const std::vector<BackendEntry>& backend_registry();
// Throws std::invalid_argument naming the backends, or why this one cannot run.
std::unique_ptr<Backend> make_backend(const std::string& name, const std::string& argument = "");

}  // namespace ctxscore::harness

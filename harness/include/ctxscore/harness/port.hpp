// Ports: implementations in another process, in any language, driven over
// the protocol of fixtures/PROTOCOL.md. A port is one more backend of the
// registry: every harness path (properties, fuzz, fixtures check, verify,
// capture) takes it like the in-process kernel.
#pragma once

#include <memory>
#include <string>

#include "ctxscore/harness/backend.hpp"

namespace ctxscore::harness {

// Seconds a port may take for one request before it is judged hung and
// killed: CTXSCORE_PORT_TIMEOUT, else 60. Throws std::invalid_argument
// when CTXSCORE_PORT_TIMEOUT is not a positive, finite number.
double port_timeout_seconds();
void set_port_timeout_seconds(double seconds);  // the --port-timeout flag
// Seconds a port may take to start and answer `hello` (imports, JIT set-up,
// a device context): CTXSCORE_PORT_STARTUP_TIMEOUT, else 120. Throws like
// port_timeout_seconds.
double port_startup_timeout_seconds();
void set_port_startup_timeout_seconds(double seconds);  // the --port-startup-timeout flag

// Starts `command` (through /bin/sh) as a port; throws BackendError when it
// does not start or does not answer `hello`.
std::unique_ptr<Backend> make_port_backend(const std::string& command);

// What a port launches for a call's shape (a port that answers `geometry`).
struct PortGeometry {
  std::int64_t chunk_count = 0, chunk = 0, grid_x = 0, grid_y = 0;
};
// The port behind a backend made by make_port_backend, for what only ports
// offer; nullptr for other backends.
class PortBackendApi {
 public:
  virtual ~PortBackendApi() = default;
  virtual bool supports(const std::string& what) = 0;  // "score", "capture", "geometry"
  virtual PortGeometry geometry(std::int64_t batch, std::int64_t max_seq_len, std::int64_t world,
                                std::int64_t heads, std::int64_t query_len) = 0;
  virtual std::string port_name() = 0;
};
PortBackendApi* as_port(Backend& b);

}  // namespace ctxscore::harness

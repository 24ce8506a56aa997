// The protocol's messages of a call (fixtures/PROTOCOL.md): a `score`-shaped
// request of a materialized case, and of any call, valid or not, each
// storage in its own dtype.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>
#include <map>
#include <string>

#include "ctxscore/harness/backend.hpp"
#include "ctxscore/harness/out_mode.hpp"
#include "ctxscore/harness/refusals.hpp"
#include "ctxscore/safetensors.hpp"

namespace ctxscore::harness::port_messages {

// A number as the protocol writes it: every digit a double holds.
inline std::string decimal(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}
// Integers as a comma list.
std::string join(const std::vector<std::int64_t>& v);

StTensor storage(StDType dtype, const void* data, std::size_t elements);
// The call's scalar arguments, as every request names them (PROTOCOL.md).
void put_scalar_arguments(std::map<std::string, std::string>& m, std::int64_t max_seq_len, std::int64_t rank, std::int64_t world,
                          std::int64_t max_query_len, double sm_scale);
// The `score`-shaped request of a call: storages and arguments.
SafeTensors call_message(const char* kind, const HostCase& host, OutMode mode, std::int64_t max_seq_len);
StDType wire_dtype(DType d);
RawTensor& call_tensor(RawCall& c, int k);
// Any call, valid or not, as a `score` request: each storage in its own
// dtype, every view's shape and strides.
SafeTensors raw_message(RawCall& c);

}  // namespace ctxscore::harness::port_messages

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
#include "ctxscore/protocol.hpp"
#include "ctxscore/safetensors.hpp"

namespace ctxscore::harness::port_messages {

StTensor storage(StDType dtype, const void* data, std::size_t elements);
// The `score`-shaped request of a call: storages and arguments.
SafeTensors call_message(const char* kind, const HostCase& host, OutMode mode, std::int64_t max_seq_len);
StDType wire_dtype(DType d);
RawTensor& call_tensor(RawCall& c, int k);
// Any call, valid or not, as a `score` request: each storage in its own
// dtype, every view's shape and strides.
SafeTensors raw_message(RawCall& c);

}  // namespace ctxscore::harness::port_messages

// Calls that break one clause of CONTRACT.md §7, for any backend: a valid
// case's storages as bytes, one clause broken in them, and what the backend
// did with the call. A backend must refuse each (the kernel's launcher
// raises, a port answers `error`) and leave every storage bitwise as it was.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ctxscore/case.hpp"
#include "ctxscore/validate.hpp"

namespace ctxscore::harness {

// One argument of a call: the view the operator is handed over a storage of
// its own (the view's data pointer is ignored; it lies at the storage's start).
struct RawTensor {
  TensorRef view;
  std::vector<std::uint8_t> bytes;
  TensorRef ref();  // the view over `bytes`
};

// A call as bytes: valid or not, what any backend can be handed.
struct RawCall {
  RawTensor idx_q, index_cache, block_table, seq_lens, out;  // out is always given
  std::int64_t max_seq_len = 0, rank = 0, world = 1, max_query_len = 1;
  double sm_scale = 1.0;
  ScoreArgs args();  // host views over the storages (devices as the views say)
};
RawCall raw_call(HostCase& host);

// One clause of §7 broken in a valid call. `apply` returns false when the
// case cannot break it (a table width below G needs G >= 2).
struct Breach {
  Clause clause;
  std::string change;  // what differs from the valid call, in the contract's words
  bool moves_device = false;  // puts a tensor on another device: only a backend that places tensors can be handed it
  std::function<bool(RawCall&)> apply;
};
// Every clause of §7 a call can break, each once.
const std::vector<Breach>& breaches();
// The clauses of the validator that no breach above breaks, each with why.
const std::vector<std::pair<Clause, std::string>>& clauses_not_breached();

// What a backend did with a call.
struct CallOutcome {
  bool refused = false;
  std::string reason;            // the backend's message when it refused
  std::optional<Clause> clause;  // the clause it named, where it names one (in-process backends)
  bool fresh = false;            // it returned a buffer of its own
};

// What a backend did wrong with the refusals of one case.
struct RefusalFailure {
  enum class Outcome {
    refused_valid,          // refused the case's valid call
    misbehaved,             // raised, crashed or answered out of protocol
    accepted,               // scored a call that breaks a clause
    fresh_buffer,           // refused, but returned a buffer of its own
    other_clause,           // refused for another clause than the one broken
    wrote_before_refusing,  // refused, but changed a storage first
  };
  std::optional<Clause> clause;  // the clause broken; none: the valid call
  std::string change;            // how the call differs from the valid one, in the contract's words
  Outcome outcome = Outcome::accepted;
  std::string said;              // the backend's reason or error, or the storage it wrote
  std::string str() const;       // one line naming the clause and what the backend did
  std::map<std::string, std::string> fields() const;  // the same as a verdict's details: clause, outcome, change, said
};
const char* outcome_name(RefusalFailure::Outcome o);

// The refusals of one case: its valid call must be scored, each breach
// refused with every storage unchanged. None when all hold, else the first
// that failed. A backend that hangs throws BackendHung.
class Backend;
std::optional<RefusalFailure> judge_refusals(Backend& b, HostCase& host);

}  // namespace ctxscore::harness

// Every named case of the project, each defined once: the upstream
// operator's own tests, one case per edge class of the corpus, the cases
// peer kernels' suites test (AITER, ATOM, vLLM's CUDA path), batches whose
// request ids pass 16 bits, and the benchmark's shapes. The CPU and GPU
// tests, `ctxscore fixtures generate` (the committed corpus) and the kernel
// benchmark all iterate this list.
#pragma once

#include <string>
#include <vector>

#include "ctxscore/case.hpp"

namespace ctxscore::harness {

enum class CaseFamily {
  upstream,   // the upstream operator's tests (in the corpus)
  edge,       // one edge class each (in the corpus)
  peer,       // the cases peer projects' own suites test (in the corpus; every rank of worlds 1, 2, 4, 8)
  benchmark,  // M3 serving shapes (too large for the corpus; the benchmark and the slow GPU tests)
  batch,      // batches past 2^15 and 2^16 requests (too large for the corpus; the large_batches check)
};
const char* family_name(CaseFamily f);

struct NamedCase {
  CaseFamily family;
  std::string what;        // the claim or shape it pins down, one line
  Case spec;               // spec.name is the case's name
  double upstream_us = 0;  // the upstream kernel's published time for a benchmark shape; 0: none
};

const std::vector<NamedCase>& named_cases();
// Throws std::invalid_argument naming the known cases.
const NamedCase& named_case(const std::string& name);
// The cases of the committed corpus (upstream, edge and peer), in registry order.
std::vector<Case> corpus_cases();
// The cases of one family, in registry order.
std::vector<Case> family_cases(CaseFamily f);
// A case at every rank of worlds 1, 2, 4 and 8 (its out packed for each
// shard): how the peer cases are run beyond the shard the corpus stores.
std::vector<Case> at_every_rank_of_worlds_1_2_4_8(const Case& c);

}  // namespace ctxscore::harness

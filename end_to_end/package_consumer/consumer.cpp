// Reads an installed corpus fixture, scores its case with the reference and
// judges that against the stored expectation; prints one line, exits 0 on a match.
#include <cstdio>
#include <exception>

#include "ctxscore/compare.hpp"
#include "ctxscore/fixture.hpp"
#include "ctxscore/score.hpp"

int main() {
  try {
    const ctxscore::Fixture f = ctxscore::read_fixture(CTXSCORE_DATA_DIR "/corpus/upstream_two_requests_rank1.safetensors");
    ctxscore::HostCase h = f.host();
    const std::vector<float> before = h.out;
    ctxscore::score_shard(h.args());
    const ctxscore::CompareReport r = ctxscore::compare(f.oracle(), h.out_layout(), before.data(), h.out.data(),
                                                        static_cast<std::int64_t>(h.out.size()));
    std::printf("consumer: %s: %s\n", f.spec.name.c_str(), r.summary().c_str());
    return r.ok() && r.written > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}

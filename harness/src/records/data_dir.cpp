#include "ctxscore/harness/data_dir.hpp"

#include <stdexcept>
#include <system_error>

namespace ctxscore::harness {

namespace fs = std::filesystem;

fs::path executable_path() {
  std::error_code ec;
  const fs::path p = fs::canonical("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot locate the running binary (/proc/self/exe): " + ec.message());
  return p;
}

fs::path data_dir() {
  const fs::path dir = executable_path().parent_path().parent_path() / "share" / "ctxscore";
  if (!fs::is_directory(dir))
    throw std::runtime_error("no data folder beside this binary: " + dir.string() +
                             " does not exist (install with `cmake --install`, or name the corpus explicitly)");
  return dir;
}

fs::path installed_corpus() {
  const fs::path corpus = data_dir() / "corpus";
  if (!fs::is_directory(corpus)) throw std::runtime_error("no corpus beside this binary: " + corpus.string() + " does not exist");
  return corpus;
}

}  // namespace ctxscore::harness

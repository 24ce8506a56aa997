// The data a binary ships with (the corpus, CONTRACT.md, FORMAT.md,
// PROTOCOL.md), found relative to the binary itself: <its folder>/../share/ctxscore.
// `cmake --install`, the Python package and the build tree all lay it out
// so; no source path is compiled in.
#pragma once

#include <filesystem>
#include <string>

namespace ctxscore::harness {

// The running executable (/proc/self/exe, links resolved).
std::filesystem::path executable_path();
// <executable's folder>/../share/ctxscore; throws std::runtime_error naming
// the path it looked at when that folder does not exist.
std::filesystem::path data_dir();
// data_dir()/corpus, the same way.
std::filesystem::path installed_corpus();

}  // namespace ctxscore::harness

// How a call passes `out`: the case's own allocation (written in place), none
// (the scorer allocates its own buffer), or one too small to fit (the scorer
// allocates, and must leave the given one untouched).
#pragma once

#include <string>

namespace ctxscore::harness {

enum class OutMode { given, absent, too_small };
const char* out_mode_name(OutMode m);
OutMode out_mode_named(const std::string& name);  // throws std::invalid_argument

}  // namespace ctxscore::harness

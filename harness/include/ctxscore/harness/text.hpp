// Text the harness shows and the lines it hands to a shell (text.cpp).
#pragma once

#include <cstddef>
#include <string>

namespace ctxscore::harness {

// `s` with control bytes (and DEL) and bytes of no valid UTF-8 character
// escaped as \xNN: text from a fixture or a port is shown on a terminal only so.
std::string printable(const std::string& s);
// Each line of `text` made printable, joined by `joint`.
std::string printable_lines(const std::string& text, const std::string& joint);
// The length of the valid UTF-8 character (an XML 1.0 one) at s[i]; 0 when there is none.
std::size_t utf8_char_length(const std::string& s, std::size_t i);
// `s` as one word for /bin/sh: as it is when that is safe, else single-quoted.
std::string shell_quoted(const std::string& s);

}  // namespace ctxscore::harness

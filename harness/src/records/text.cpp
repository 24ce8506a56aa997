// Text the harness shows and the lines it hands back to a shell: bytes made
// printable (invalid UTF-8 and control bytes escaped), words shell-quoted.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>

#include "ctxscore/harness/text.hpp"
#include "ctxscore/wire_format.hpp"

namespace ctxscore::harness {

std::size_t utf8_char_length(const std::string& s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  std::uint32_t cp = n == 1 ? b : n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (byte(i + k) & 0x3F);
  }
  const std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF) return 0;
  return n;
}

std::string printable(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto u = static_cast<unsigned char>(s[i]);
    const std::size_t n = utf8_char_length(s, i);
    if (n == 0 || u < kEscapeControlBelow || u == kEscapeDelete) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "%0*x", kEscapeHexDigits, u);
      o += kEscapePrefix;
      o += hex;
      ++i;
    } else {
      o.append(s, i, n);
      i += n;
    }
  }
  return o;
}

std::string printable_lines(const std::string& text, const std::string& joint) {
  std::string out;
  std::size_t from = 0;
  for (std::size_t nl; (nl = text.find('\n', from)) != std::string::npos; from = nl + 1)
    out += printable(text.substr(from, nl - from)) + joint;
  return out + printable(text.substr(from));
}

std::string shell_quoted(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("/._-+=:,@%", c) != nullptr;
  });
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace ctxscore::harness

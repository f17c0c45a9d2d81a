#include "common/log_lines.h"

#include <algorithm>

namespace sg {

void LineSplitter::Feed(std::string_view data, const Emit& emit) {
  while (!data.empty()) {
    const size_t nl = data.find('\n');
    const std::string_view piece = data.substr(0, nl);
    if (skipping_) {
      dropped_ += piece.size();
    } else if (pending_.size() + piece.size() > max_line_) {
      const size_t room = max_line_ - pending_.size();
      pending_.append(piece.substr(0, room));
      dropped_ += piece.size() - room;
      emit(pending_, /*cut=*/true);
      pending_.clear();
      pending_.shrink_to_fit();
      skipping_ = true;
    } else {
      pending_.append(piece);
    }
    if (nl == std::string_view::npos) return;
    if (!skipping_) emit(pending_, /*cut=*/false);
    pending_.clear();
    skipping_ = false;
    data.remove_prefix(nl + 1);
  }
}

void LineSplitter::Finish(const Emit& emit) {
  if (!pending_.empty()) emit(pending_, /*cut=*/false);
  pending_.clear();
  skipping_ = false;
}

namespace {

// The length of the valid UTF-8 sequence at the start of `s`; 0 when there
// is none (overlong forms, surrogates and values past U+10FFFF included).
size_t Utf8Length(std::string_view s) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  size_t n;
  uint32_t cp;
  if (b0 < 0x80) return 1;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void AppendHexEscape(unsigned char c, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 0xF];
}

bool IsC0OrDel(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7F; }

}  // namespace

std::string EscapeLogText(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  while (!raw.empty()) {
    const auto c = static_cast<unsigned char>(raw[0]);
    if (c == '\\') {
      out += "\\\\";
      raw.remove_prefix(1);
      continue;
    }
    const size_t n = IsC0OrDel(c) ? 0 : Utf8Length(raw);
    if (n == 0) {
      AppendHexEscape(c, out);
      raw.remove_prefix(1);
      continue;
    }
    out.append(raw.substr(0, n));
    raw.remove_prefix(n);
  }
  return out;
}

std::string EscapeControls(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const auto c = static_cast<unsigned char>(text[0]);
    const size_t n = IsC0OrDel(c) ? 0 : Utf8Length(text);
    // U+0080..U+009F: 0xC2 0x80..0x9F.
    const bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(text[1]) <= 0x9F;
    if (n == 0 || c1) {
      for (size_t i = 0; i < std::max<size_t>(n, 1); ++i) {
        AppendHexEscape(static_cast<unsigned char>(text[i]), out);
      }
      text.remove_prefix(std::max<size_t>(n, 1));
      continue;
    }
    out.append(text.substr(0, n));
    text.remove_prefix(n);
  }
  return out;
}

std::string FormatLogLine(std::string_view time_utc, std::string_view source,
                          std::string_view text) {
  std::string line;
  line.reserve(time_utc.size() + source.size() + text.size() + 3);
  line.append(time_utc).append(" ").append(source).append(" ").append(text).append("\n");
  return line;
}

std::optional<LogLine> ParseLogLine(std::string_view line) {
  const size_t a = line.find(' ');
  if (a == std::string_view::npos || a == 0) return std::nullopt;
  const size_t b = line.find(' ', a + 1);
  if (b == std::string_view::npos || b == a + 1) return std::nullopt;
  return LogLine{std::string(line.substr(0, a)), std::string(line.substr(a + 1, b - a - 1)),
                 std::string(line.substr(b + 1))};
}

}  // namespace sg

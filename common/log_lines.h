// The lines of captured output (docs/design.md §13): a byte stream split
// into lines of bounded length, escaped so that a line is always one line of
// valid UTF-8 text, and the "<time> <source> <text>" form the log files and
// the shipped segments hold.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace sg {

// The longest line kept whole (docs/operations.md, "Logs").
inline constexpr size_t kMaxLogLineBytes = size_t{64} << 10;
// What ends a line that was cut at kMaxLogLineBytes.
inline constexpr std::string_view kCutMark = " [spotguard: line cut at 65536 bytes]";

// Splits a byte stream into lines. Memory stays below max_line bytes however
// long a line is: a line longer than that is handed on once, as its first
// max_line bytes with `cut` set, and the rest of it up to its newline is
// dropped (and counted).
class LineSplitter {
 public:
  using Emit = std::function<void(std::string_view line, bool cut)>;
  explicit LineSplitter(size_t max_line = kMaxLogLineBytes) : max_line_(max_line) {}

  // Emits every line that `data` completes (without its '\n').
  void Feed(std::string_view data, const Emit& emit);
  // Emits what is pending as a last line (the stream ended without '\n').
  void Finish(const Emit& emit);

  size_t buffered() const { return pending_.size(); }
  uint64_t dropped_bytes() const { return dropped_; }

 private:
  size_t max_line_;
  std::string pending_;
  bool skipping_ = false;  // inside a line already emitted cut
  uint64_t dropped_ = 0;
};

// `raw` as printable text: '\\' becomes "\\\\", control bytes other than
// tab and bytes that are not valid UTF-8 become "\xNN". Never contains '\n'.
std::string EscapeLogText(std::string_view raw);

// `text` safe to print on a terminal: control bytes (all below 0x20 but tab,
// and DEL), the C1 controls (U+0080 to U+009F, which some terminals obey as
// ESC sequences) and bytes that are not valid UTF-8 become "\xNN"; all else,
// backslashes included, is kept. Text EscapeLogText wrote holds none of
// them and comes out unchanged; a stored segment someone crafted cannot set
// the terminal's title or clear its screen (`spotguard logs`).
std::string EscapeControls(std::string_view text);

// One line of a log file: "2026-11-22T08:22:00.123Z trainer.out <text>\n".
// `source` has no space; `text` is already escaped.
std::string FormatLogLine(std::string_view time_utc, std::string_view source,
                          std::string_view text);

struct LogLine {
  std::string time;  // "2026-11-22T08:22:00.123Z"
  std::string source;
  std::string text;
};
// The parts of one line of a log file (without '\n'); nullopt when it has
// not that shape.
std::optional<LogLine> ParseLogLine(std::string_view line);

}  // namespace sg

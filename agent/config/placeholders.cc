#include "agent/config/placeholders.h"

namespace sg {

std::string ExpandPlaceholders(
    std::string_view arg,
    const std::function<std::optional<std::string>(std::string_view name)>& value) {
  std::string out;
  out.reserve(arg.size());
  size_t i = 0;
  while (i < arg.size()) {
    const char c = arg[i];
    if ((c == '{' || c == '}') && i + 1 < arg.size() && arg[i + 1] == c) {
      out += c;  // an escaped brace
      i += 2;
      continue;
    }
    if (c == '{') {
      size_t end = i + 1;
      while (end < arg.size() && ((arg[end] >= 'a' && arg[end] <= 'z') || arg[end] == '_')) ++end;
      if (end > i + 1 && end < arg.size() && arg[end] == '}') {
        const std::string_view name = arg.substr(i + 1, end - i - 1);
        if (std::optional<std::string> v = value(name)) {
          out += *v;
        } else {
          out.append(arg.substr(i, end + 1 - i));
        }
        i = end + 1;
        continue;
      }
    }
    out += c;
    ++i;
  }
  return out;
}

}  // namespace sg

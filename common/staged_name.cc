// The names of a FileStore's staged writes (common/staged_name.h).
#include "common/staged_name.h"

#include "common/files.h"
#include "common/strings.h"

namespace sg {

// A staged file is named "<random>.<key>", the key with '%' and '/'
// percent-encoded, so that a gc of one prefix (one job) touches only the
// writes of its own keys. An encoded key longer than kStagedKeyBytes keeps
// its head only, marked by '+' in place of '.' (a file name stops at 255
// bytes); its own prefix is still enough to tell the job.
constexpr size_t kStagedKeyBytes = 200;

std::string StagedName(const std::string& key) {
  std::string enc;
  for (const char c : key) {
    const size_t before = enc.size();
    if (c == '%') {
      enc += "%25";
    } else if (c == '/') {
      enc += "%2F";
    } else {
      enc += c;
    }
    if (enc.size() > kStagedKeyBytes) {
      enc.resize(before);  // never half an escape
      return RandomHex() + "+" + enc;
    }
  }
  return RandomHex() + "." + enc;
}

// The key (or its head) a staged file is for; nullopt for a name without
// one (a writer of spotguard 0.2 or older).
std::optional<std::string> StagedKeyOf(std::string_view name) {
  const size_t sep = name.find_first_of(".+");
  if (sep == std::string_view::npos) return std::nullopt;
  std::string key;
  for (size_t i = sep + 1; i < name.size(); ++i) {
    const std::string_view esc = name.substr(i, 3);
    if (esc == "%25" || esc == "%2F") {
      key += esc == "%25" ? '%' : '/';
      i += 2;
    } else {
      key += name[i];
    }
  }
  return key;
}

}  // namespace sg

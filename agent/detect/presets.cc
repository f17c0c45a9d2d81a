// CheckpointDetector: the preset rule for the configured preset
// (agent/detect/preset_rules.h), with the format check that keeps torn tensor files
// out; and the naming rules every preset shares: steps in names, temporary
// names, settle times.
#include "agent/detect/presets.h"

#include <fcntl.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "agent/detect/preset_rules.h"
#include "common/files.h"
#include "common/log.h"

namespace sg {

using preset_detail::DetectCaffe;
using preset_detail::DetectDcp;
using preset_detail::DetectFiles;
using preset_detail::DetectHuggingface;
using preset_detail::DetectTensorflow;
using preset_detail::IsUnder;
using preset_detail::kDcpMetadata;
using preset_detail::Listing;
using preset_detail::ParseDigits;

std::optional<int64_t> ParseStep(std::string_view name) {
  static const std::regex kStep(
      R"((?:^|[^A-Za-z0-9])(?:global_step|step|iteration|iter)[_=-]?([0-9]+)(?![0-9]))");
  const std::string s(name);
  std::optional<int64_t> found;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), kStep); it != std::sregex_iterator();
       ++it) {
    if (auto v = ParseDigits((*it)[1].str())) found = v;
  }
  return found;
}

bool IsTempName(std::string_view basename) {
  if (basename == kDcpMetadata) return false;
  if (basename.empty() || basename.starts_with('.') || basename.ends_with('~')) return true;
  static const std::regex kTempSuffix(R"(\.(tmp|temp|part|partial)([._-]?[A-Za-z0-9]+)?$)",
                                      std::regex::icase);
  static const std::regex kPythonTempfile(R"(^tmp[a-z0-9_]{8}(\..*)?$)");
  const std::string s(basename);
  return std::regex_search(s, kTempSuffix) || std::regex_match(s, kPythonTempfile);
}

std::chrono::nanoseconds DefaultSettleTime(Preset preset) {
  switch (preset) {
    case Preset::kPytorch:
    case Preset::kLightning:
    case Preset::kGeneric:
      return std::chrono::seconds(10);
    case Preset::kCaffe:
    case Preset::kHuggingface:
    case Preset::kTensorflow:
    case Preset::kDcp:
      return std::chrono::seconds(2);
  }
  return std::chrono::seconds(10);
}

std::chrono::nanoseconds SettleTime(const Config& config) {
  if (config.settle_time) return *config.settle_time;
  return DefaultSettleTime(config.preset);
}

CheckpointDetector::CheckpointDetector(std::string checkpoint_dir, Preset preset,
                                       std::vector<std::string> patterns)
    : checkpoint_dir_(std::move(checkpoint_dir)),
      preset_(preset),
      patterns_(std::move(patterns)),
      warned_(std::make_shared<Warned>()) {
  while (checkpoint_dir_.size() > 1 && checkpoint_dir_.back() == '/') checkpoint_dir_.pop_back();
}

struct CheckpointDetector::Warned {
  std::mutex mu;
  std::set<std::string> paths;
};

std::vector<std::string> CheckpointDetector::SymlinksLeftOut(const std::vector<ListedFile>& files,
                                                             const std::vector<Checkpoint>& found) {
  std::set<std::string> regular;
  for (const ListedFile& f : files) {
    if (!f.is_symlink) regular.insert(f.relpath);
  }
  std::vector<std::string> out;
  for (const ListedFile& f : files) {
    if (!f.is_symlink || Listing::HasTempComponent(f.relpath)) continue;
    const bool in_checkpoint = std::any_of(found.begin(), found.end(), [&](const Checkpoint& c) {
      return c.id != f.relpath && IsUnder(f.relpath, c.id);
    });
    if (!in_checkpoint && regular.contains(f.symlink_target)) continue;
    out.push_back(f.relpath);
  }
  return out;
}

size_t CheckpointDetector::symlink_warnings() const {
  std::lock_guard<std::mutex> lock(warned_->mu);
  return warned_->paths.size();
}

CheckpointDetector CheckpointDetector::ForConfig(const Config& config) {
  return CheckpointDetector(config.checkpoint_dir, config.preset, config.patterns);
}

// Whether a serialized tensor file is whole, for the formats whose end can
// be recognised: torch.save's zip (the end-of-central-directory record must
// be there) and safetensors (header length + JSON header + the data it
// describes must add up to the file size). Other files pass.
bool LooksWhole(const std::string& path, uint64_t size) {
  // A file that cannot be read now is judged by the capture, which fails
  // cleanly when it has vanished.
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) return true;
  auto head = PreadUpTo(fd->get(), 0, 8, path);
  if (!head.ok()) return true;
  if (head->size() >= 4 && head->compare(0, 4, "PK\x03\x04") == 0) {
    // EOCD: 22 bytes plus a comment of at most 65535 bytes at the end.
    const uint64_t tail = std::min<uint64_t>(size, 22 + 65535);
    auto end = PreadUpTo(fd->get(), size - tail, tail, path);
    return end.ok() && end->rfind("PK\x05\x06") != std::string::npos &&
           end->size() - end->rfind("PK\x05\x06") >= 22;
  }
  if (path.ends_with(".safetensors") && head->size() == 8) {
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i)
      header_len = (header_len << 8) | static_cast<unsigned char>((*head)[i]);
    if (header_len > size - 8) return false;
    auto header = PreadUpTo(fd->get(), 8, header_len, path);
    if (!header.ok()) return false;
    auto j = nlohmann::json::parse(*header, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return false;
    uint64_t data_end = 0;
    for (const auto& [name, t] : j.items()) {
      if (name == "__metadata__" || !t.is_object() || !t.contains("data_offsets")) continue;
      const auto& off = t["data_offsets"];
      if (off.is_array() && off.size() == 2 && off[1].is_number_unsigned()) {
        data_end = std::max(data_end, off[1].get<uint64_t>());
      }
    }
    return 8 + header_len + data_end == size;
  }
  return true;
}

std::vector<Checkpoint> CheckpointDetector::Detect(const std::vector<ListedFile>& files,
                                                   const std::set<std::string>& unsettled) const {
  Listing listing(files, unsettled);
  std::vector<Checkpoint> out;
  switch (preset_) {
    case Preset::kCaffe:
      DetectCaffe(listing, out);
      break;
    case Preset::kPytorch:
    case Preset::kLightning:
    case Preset::kGeneric:
      DetectFiles(listing, patterns_, out);
      if (preset_ != Preset::kGeneric) {
        // A trainer killed in the middle of torch.save leaves a file that
        // looks settled; its format shows it is not whole.
        std::map<std::string, uint64_t> sizes;
        for (const ListedFile& f : files) sizes[f.relpath] = f.size;
        std::erase_if(out, [&](const Checkpoint& c) {
          return std::any_of(c.relpaths.begin(), c.relpaths.end(), [&](const std::string& rel) {
            return !LooksWhole(checkpoint_dir_ + "/" + rel, sizes[rel]);
          });
        });
      }
      break;
    case Preset::kHuggingface:
      DetectHuggingface(listing, out);
      break;
    case Preset::kDcp:
      DetectDcp(listing, node_rank_, out);
      break;
    case Preset::kTensorflow:
      DetectTensorflow(listing, checkpoint_dir_, out);
      break;
  }
  for (const std::string& rel : SymlinksLeftOut(files, out)) {
    std::lock_guard<std::mutex> lock(warned_->mu);
    if (!warned_->paths.insert(rel).second) continue;
    const std::string path = checkpoint_dir_ + "/" + rel;
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(path, ec).string();
    LogWarn(
        "{} is a symlink{}: spotguard does not follow symlinks, so it is NOT uploaded and no "
        "snapshot holds it; write the file itself into {} (docs/checkpoints.md, \"Symlinks\")",
        path, ec ? "" : " to " + target, checkpoint_dir_);
  }
  SortNewestFirst(out);
  return out;
}

}  // namespace sg

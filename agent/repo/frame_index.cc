#include "agent/repo/frame_index.h"

namespace sg {

std::string FrameIndex::Key(Codec codec, const std::string& sha256) {
  return std::string(CodecName(codec)) + ":" + sha256;
}

void FrameIndex::AddManifest(const Manifest& m, const std::set<std::string>& quarantined) {
  for (const ManifestFile& f : m.files) {
    if (f.frame_size != kFrameSize) continue;
    for (const FrameRef& r : f.frames) {
      if (!r.sha256.empty() && !quarantined.contains(r.key)) Add(f.codec, r);
    }
  }
}

void FrameIndex::Add(Codec codec, const FrameRef& frame) {
  std::lock_guard<std::mutex> lock(mu_);
  frames_.emplace(Key(codec, frame.sha256), frame);
}

void FrameIndex::MarkReady(bool usable) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_ = true;
    usable_ = usable;
  }
  ready_cv_.notify_all();
}

std::optional<FrameRef> FrameIndex::Find(Codec codec, const std::string& sha256) const {
  std::unique_lock<std::mutex> lock(mu_);
  ready_cv_.wait(lock, [&] { return ready_; });
  if (!usable_) return std::nullopt;
  auto it = frames_.find(Key(codec, sha256));
  if (it == frames_.end()) return std::nullopt;
  return it->second;
}

bool FrameIndex::ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_;
}

size_t FrameIndex::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return frames_.size();
}

}  // namespace sg

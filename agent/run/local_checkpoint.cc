#include "agent/run/local_checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <set>

#include "agent/repo/restore_placement.h"
#include "agent/repo/store_names.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/xxh3.h"

namespace sg {
namespace {

// Whether the file at `path` holds the raw bytes that `f` lists: its
// SHA-256 (formats 1 and 2), or each frame's digest in turn (format 3 has no
// whole-file digest; XXH3-128 where the frame gives it, else SHA-256).
bool HoldsFileBytes(const std::string& path, const ManifestFile& f) {
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) return false;
  if (!f.sha256.empty()) {
    Sha256Stream sha;
    for (uint64_t at = 0;;) {
      auto chunk = PreadUpTo(fd->get(), at, 4 << 20, path);
      if (!chunk.ok()) return false;
      if (chunk->empty()) break;
      sha.Update(*chunk);
      at += chunk->size();
    }
    return sha.FinishHex() == f.sha256;
  }
  for (size_t i = 0; i < f.frames.size(); ++i) {
    const uint64_t want = f.FrameRawSize(i);
    auto chunk = PreadUpTo(fd->get(), i * f.frame_size, want, path);
    if (!chunk.ok() || chunk->size() != want) return false;
    const FrameRef& frame = f.frames[i];
    const bool same = frame.xxh3.empty() ? Sha256Hex(*chunk) == frame.sha256
                                         : Xxh3Hex(*chunk) == frame.xxh3;
    if (!same) return false;
  }
  return true;
}

// Whether the local checkpoint is exactly the files of `m`.
bool HoldsSameBytes(const std::string& dir, const Checkpoint& local, const Manifest& m,
                    const std::optional<RestoreMarker>& marker) {
  if (local.relpaths.size() != m.files.size()) return false;
  const std::set<std::string> paths(local.relpaths.begin(), local.relpaths.end());
  std::vector<std::pair<const ManifestFile*, struct stat>> to_hash;
  for (const ManifestFile& f : m.files) {
    if (!paths.contains(f.path)) return false;
    struct stat st {};
    if (::stat((dir + "/" + f.path).c_str(), &st) != 0) return false;
    if (static_cast<uint64_t>(st.st_size) != f.size) return false;
    if (!(marker && marker->seq == m.seq && marker->Owns(f.path, st))) to_hash.push_back({&f, st});
  }
  for (const auto& [f, st] : to_hash) {
    if (!HoldsFileBytes(dir + "/" + f->path, *f)) return false;
  }
  return true;
}

std::string StepText(const std::optional<int64_t>& step) {
  return step ? "step " + std::to_string(*step) : "no step";
}

}  // namespace

LocalComparison CompareLocalCheckpoint(const std::string& checkpoint_dir, const Checkpoint& local,
                                       const std::vector<Manifest>& history) {
  if (history.empty()) {
    return {LocalStanding::kNewer, std::nullopt, "the store has no snapshot of the job"};
  }
  const Manifest& newest = history.front();
  const std::string about = "snapshot " + SeqName(newest.seq) + " (" + StepText(newest.step) + ")";
  if (local.step && newest.step) {
    if (*local.step > *newest.step)
      return {LocalStanding::kNewer, newest.seq, "later than " + about};
    if (*local.step < *newest.step)
      return {LocalStanding::kOlder, newest.seq, "earlier than " + about};
    return {LocalStanding::kInStore, newest.seq, "the same step as " + about};
  }
  // Names without a step ("last.pt", "model.pt", "last.ckpt"): only the bytes tell.
  const std::optional<RestoreMarker> marker = ReadRestoreMarker(checkpoint_dir);
  for (size_t i = 0; i < history.size(); ++i) {
    if (!HoldsSameBytes(checkpoint_dir, local, history[i], marker)) continue;
    if (i == 0) return {LocalStanding::kInStore, newest.seq, "the same bytes as " + about};
    return {LocalStanding::kOlder, newest.seq,
            "the bytes of the older snapshot " + SeqName(history[i].seq)};
  }
  return {LocalStanding::kUnknown, newest.seq,
          "no step to compare with " + about + ", and bytes that no snapshot in the store holds"};
}

}  // namespace sg

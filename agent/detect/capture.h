// Capturing a complete checkpoint without tearing: its files are hardlinked
// (copied where links are impossible) into a private staging directory, so a
// trainer that deletes or renames over them does not disturb the upload, and
// the identity of each staged file (inode, size, mtime in ns) is taken so that
// a rewrite in place is detected afterwards. docs/checkpoints.md has the
// guarantees and their limits.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/detect/checkpoint.h"
#include "common/status.h"

struct stat;

namespace sg {

// What tells a file apart from a rewrite of it: a file whose identity is the
// same before and after it is read was not written meanwhile (as far as the
// timestamp tick shows; docs/checkpoints.md).
struct FileIdentity {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};
FileIdentity IdentityOf(const struct stat& st);
// "size 10 -> 12; mtime +5000 ns": what differs between two identities.
std::string DescribeChange(const FileIdentity& was, const FileIdentity& now);

// The one error for "a file changed while it was captured or read": code
// kUnavailable (take the next complete checkpoint), reason "FileChanged".
// `what` says how, e.g. "changed while it was read".
Status FileChanged(const std::string& relpath, std::string_view what);

struct CapturedFile {
  std::string relpath;      // relative to checkpoint_dir
  std::string staged_path;  // absolute; read the bytes from here (the file itself in place)
  uint32_t mode = 0;        // permission bits of the original
  uint64_t size = 0;
  FileIdentity identity;  // of staged_path when captured
  bool linked = false;    // a hardlink to the trainer's file, else a private copy (or in place)
};

class CapturedCheckpoint {
 public:
  // Stages every file of `checkpoint` below `staging_root` (created if
  // missing; must be on the same filesystem as checkpoint_dir for links).
  // Fails with FileChanged (kUnavailable) when the checkpoint changed or
  // vanished since it was detected (a file newer than
  // checkpoint.newest_mtime, a file gone, a file changing while copied):
  // detect again and take the next complete state. Other codes are real
  // errors (no space, permissions).
  static StatusOr<CapturedCheckpoint> Capture(const std::string& checkpoint_dir,
                                              const Checkpoint& checkpoint,
                                              const std::string& staging_root);
  // Files read where they are, without staging (`spotguard snapshot --dir
  // DIR | FILE...`, tests): `files` maps each relpath to the file it is read
  // from, and `checkpoint` gives the rest (its relpaths are set from
  // `files`). Their identities are taken now, so a file rewritten before or
  // while it is read, or before the commit, fails the snapshot.
  // InvalidArgument for a path that is not a regular file.
  static StatusOr<CapturedCheckpoint> InPlace(const std::map<std::string, std::string>& files,
                                              Checkpoint checkpoint);
  // The same for checkpoint.relpaths below `dir`.
  static StatusOr<CapturedCheckpoint> InPlace(const std::string& dir, Checkpoint checkpoint);

  CapturedCheckpoint(CapturedCheckpoint&& other) noexcept;
  CapturedCheckpoint& operator=(CapturedCheckpoint&& other) noexcept;
  CapturedCheckpoint(const CapturedCheckpoint&) = delete;
  CapturedCheckpoint& operator=(const CapturedCheckpoint&) = delete;
  // Removes the staging directory (the trainer's files are untouched).
  ~CapturedCheckpoint();

  const Checkpoint& checkpoint() const { return checkpoint_; }
  const std::vector<CapturedFile>& files() const { return files_; }  // sorted by relpath
  const std::string& staging_dir() const { return staging_dir_; }
  uint64_t total_bytes() const;

  // Re-stats every staged file; FileChanged naming the first file whose
  // inode, size or mtime changed since the capture (it was rewritten in place
  // while staged, so bytes read from it may be torn). Call it after reading
  // everything; bytes read before an OK Verify() are the captured state.
  Status Verify() const;

 private:
  CapturedCheckpoint() = default;
  void RemoveStaging();

  Checkpoint checkpoint_;
  std::vector<CapturedFile> files_;
  std::string staging_dir_;
};

// The staging root for `job`: "<parent of checkpoint_dir>/.spotguard-staging-<job>"
// when that parent is on the same filesystem and writable, else
// "<checkpoint_dir>/.spotguard-staging". Creates it (mode 0700).
StatusOr<std::string> PrepareStagingRoot(const std::string& checkpoint_dir, const std::string& job);

// Removes captures left in `staging_root` by an agent that died; call once at
// start, before capturing. A missing root is fine.
Status RemoveStaleCaptures(const std::string& staging_root);

}  // namespace sg

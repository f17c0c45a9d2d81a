// The file:// object store: a directory tree with the same contracts as S3,
// for single machines, laptops and tests. Keys map to paths below the root;
// writes go to <root>/.spotguard-tmp first and are renamed into place, so
// a crash never leaves a partial object under its key.
//
// Limits (documented in docs/stores.md): keys must be valid relative paths
// (no empty, "." or ".." segment, no leading or trailing '/'), a key cannot
// also be the directory of another key ("a" and "a/b"), and etags rely on the
// filesystem keeping nanosecond mtimes (ext4, xfs, btrfs, tmpfs do).
// Conditional writes are serialised with flock(2) on <root>/.spotguard-lock,
// so they are safe between processes on one host, not across NFS clients.
#pragma once

#include <memory>
#include <string>

#include "common/object_store.h"

namespace sg {

// Whether opening a store creates its root: commands that only read never do.
enum class FileRoot { kCreate, kMustExist };

class FileStore final : public ObjectStore {
 public:
  // `root` must be absolute; it is created when missing, or with kMustExist
  // a missing root is NotFound, naming the path, and nothing is created.
  static StatusOr<std::unique_ptr<FileStore>> Open(const std::string& root,
                                                   FileRoot mode = FileRoot::kCreate);

  StatusOr<std::string> Put(const std::string& key, std::string_view data,
                            const PutCondition& condition) override;
  StatusOr<std::string> Get(const std::string& key, std::optional<ByteRange> range,
                            ObjectInfo* info) override;
  StatusOr<ObjectInfo> Head(const std::string& key) override;
  StatusOr<ListPage> List(const std::string& prefix, const std::string& token,
                          int max_keys) override;
  Status Delete(const std::string& key) override;
  StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& key,
                                                    uint64_t size_hint = 0) override;
  StatusOr<int> CleanStaleWrites(const std::string& prefix, std::chrono::seconds age,
                                 const KeyFilter& spare) override;
  std::string Describe() const override { return "file://" + root_; }

 private:
  class Writer;
  explicit FileStore(std::string root);
  StatusOr<std::string> PathFor(const std::string& key) const;
  // Moves a staged file to `path` (under the store lock) as Put's condition
  // says, and fsyncs the directory.
  Status CommitStaged(const std::string& key, const std::string& staged, const std::string& path,
                      const PutCondition& condition);
  // A new staged file's path for a write of `key`.
  std::string NewStagedPath(const std::string& key) const;

  const std::string root_;
  const std::string tmp_dir_;
  const std::string lock_path_;
};

}  // namespace sg

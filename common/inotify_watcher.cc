#include "common/inotify_watcher.h"

#include <dirent.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sg {
namespace {

constexpr uint32_t kDirMask = IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO |
                              IN_DELETE | IN_DELETE_SELF | IN_EXCL_UNLINK | IN_ONLYDIR |
                              IN_DONT_FOLLOW;

std::string JoinRel(const std::string& dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  if (name.empty()) return dir;
  return dir + "/" + std::string(name);
}

bool IsAtOrUnder(const std::string& path, const std::string& dir) {
  return path == dir ||
         (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

}  // namespace

std::string_view WatchEventKindName(WatchEvent::Kind kind) {
  switch (kind) {
    case WatchEvent::Kind::kCreated:
      return "created";
    case WatchEvent::Kind::kModified:
      return "modified";
    case WatchEvent::Kind::kClosedWrite:
      return "closed-write";
    case WatchEvent::Kind::kMovedIn:
      return "moved-in";
    case WatchEvent::Kind::kMovedOut:
      return "moved-out";
    case WatchEvent::Kind::kDeleted:
      return "deleted";
    case WatchEvent::Kind::kDirAdded:
      return "dir-added";
    case WatchEvent::Kind::kOverflow:
      return "overflow";
    case WatchEvent::Kind::kRootGone:
      return "root-gone";
  }
  return "unknown";
}

InotifyWatcher::InotifyWatcher(UniqueFd fd, std::string root, IgnoreFn ignore)
    : fd_(std::move(fd)), root_(std::move(root)), ignore_(std::move(ignore)) {}

StatusOr<std::unique_ptr<InotifyWatcher>> InotifyWatcher::Open(const std::string& root,
                                                               IgnoreFn ignore) {
  std::string clean = root;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  struct stat st {};
  if (::stat(clean.c_str(), &st) != 0) return Status::FromErrno(errno, "watch " + clean);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument("watch " + clean + ": not a directory");
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "inotify_init1");
  std::unique_ptr<InotifyWatcher> w(new InotifyWatcher(UniqueFd(fd), clean, std::move(ignore)));
  SG_RETURN_IF_ERROR(w->WatchTree("", &w->dirs_));
  return w;
}

std::string InotifyWatcher::FullPath(const std::string& rel) const {
  return rel.empty() ? root_ : root_ + "/" + rel;
}

Status InotifyWatcher::WatchTree(const std::string& rel, std::map<int, std::string>* seen) {
  const std::string full = FullPath(rel);
  // The root also reports being moved away (below it, the parent does).
  const int wd = ::inotify_add_watch(fd_.get(), full.c_str(),
                                     rel.empty() ? kDirMask | IN_MOVE_SELF : kDirMask);
  if (wd < 0) {
    // Gone (or replaced by a file) before we got to it: nothing to watch.
    if (!rel.empty() && (errno == ENOENT || errno == ENOTDIR)) return Status::Ok();
    if (errno == ENOSPC) {
      return Status::NoSpace("watch " + full +
                             ": the inotify watch limit is reached (raise "
                             "fs.inotify.max_user_watches)");
    }
    return Status::FromErrno(errno, "watch " + full);
  }
  (*seen)[wd] = rel;
  DIR* dir = ::opendir(full.c_str());
  if (dir == nullptr) {
    if (!rel.empty() && (errno == ENOENT || errno == ENOTDIR)) return Status::Ok();
    return Status::FromErrno(errno, "list " + full);
  }
  std::vector<std::string> subdirs;
  while (struct dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string child = JoinRel(rel, name);
    if (ignore_ && ignore_(child)) continue;
    bool is_dir = entry->d_type == DT_DIR;
    if (entry->d_type == DT_UNKNOWN) {
      struct stat st {};
      is_dir = ::lstat(FullPath(child).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }
    if (is_dir) subdirs.push_back(child);
  }
  ::closedir(dir);
  for (const std::string& sub : subdirs) SG_RETURN_IF_ERROR(WatchTree(sub, seen));
  return Status::Ok();
}

Status InotifyWatcher::Resync() {
  std::map<int, std::string> seen;
  SG_RETURN_IF_ERROR(WatchTree("", &seen));
  for (const auto& [wd, rel] : dirs_) {
    if (seen.count(wd) == 0) ::inotify_rm_watch(fd_.get(), wd);
  }
  dirs_ = std::move(seen);
  return Status::Ok();
}

StatusOr<bool> InotifyWatcher::Rewatch() {
  if (!root_gone_) return false;
  struct stat st {};
  if (::stat(root_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  std::map<int, std::string> seen;
  Status watched = WatchTree("", &seen);
  if (!watched.ok()) {
    for (const auto& entry : seen) ::inotify_rm_watch(fd_.get(), entry.first);
    // Deleted again while we looked: still gone, try later.
    if (watched.Is(StatusCode::kNotFound) || watched.Is(StatusCode::kInvalidArgument)) return false;
    return watched;
  }
  dirs_ = std::move(seen);
  root_gone_ = false;
  return true;
}

StatusOr<std::vector<WatchEvent>> InotifyWatcher::ReadEvents() {
  std::vector<WatchEvent> events;
  alignas(struct inotify_event) char buf[64 * 1024];
  while (true) {
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return Status::FromErrno(errno, "read inotify events for " + root_);
    }
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const struct inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(struct inotify_event) + ev->len);
      if (ev->mask & IN_Q_OVERFLOW) {
        SG_RETURN_IF_ERROR(Resync());
        events.push_back({WatchEvent::Kind::kOverflow, "", false});
        continue;
      }
      auto dir_it = dirs_.find(ev->wd);
      if (dir_it == dirs_.end()) continue;  // a watch already dropped
      if (dir_it->second.empty() && (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))) {
        // The root itself is gone: whatever is still watched below it (a
        // moved root keeps its subtree) no longer lies under root_.
        for (const auto& entry : dirs_) ::inotify_rm_watch(fd_.get(), entry.first);
        dirs_.clear();
        root_gone_ = true;
        events.push_back({WatchEvent::Kind::kRootGone, "", true});
        continue;
      }
      if (ev->mask & IN_IGNORED) {
        dirs_.erase(dir_it);
        continue;
      }
      if (ev->mask & IN_DELETE_SELF) continue;  // the parent reports the deletion
      const std::string name = ev->len > 0 ? std::string(ev->name) : std::string();
      const std::string path = JoinRel(dir_it->second, name);
      if (ignore_ && ignore_(path)) continue;
      const bool is_dir = (ev->mask & IN_ISDIR) != 0;
      if (is_dir && (ev->mask & (IN_MOVED_FROM | IN_DELETE))) {
        // Drop the watches of the directory and everything below it; a move
        // within the tree comes back as IN_MOVED_TO and is watched anew.
        for (auto it = dirs_.begin(); it != dirs_.end();) {
          if (IsAtOrUnder(it->second, path)) {
            if (ev->mask & IN_MOVED_FROM) ::inotify_rm_watch(fd_.get(), it->first);
            it = dirs_.erase(it);
          } else {
            ++it;
          }
        }
        events.push_back(
            {ev->mask & IN_DELETE ? WatchEvent::Kind::kDeleted : WatchEvent::Kind::kMovedOut, path,
             true});
        continue;
      }
      if (is_dir && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
        SG_RETURN_IF_ERROR(WatchTree(path, &dirs_));
        events.push_back({WatchEvent::Kind::kDirAdded, path, true});
        continue;
      }
      if (is_dir) continue;
      if (ev->mask & IN_CREATE) events.push_back({WatchEvent::Kind::kCreated, path, false});
      if (ev->mask & IN_MODIFY) events.push_back({WatchEvent::Kind::kModified, path, false});
      if (ev->mask & IN_CLOSE_WRITE) {
        events.push_back({WatchEvent::Kind::kClosedWrite, path, false});
      }
      if (ev->mask & IN_MOVED_TO) events.push_back({WatchEvent::Kind::kMovedIn, path, false});
      if (ev->mask & IN_MOVED_FROM) events.push_back({WatchEvent::Kind::kMovedOut, path, false});
      if (ev->mask & IN_DELETE) events.push_back({WatchEvent::Kind::kDeleted, path, false});
    }
  }
  return events;
}

StatusOr<bool> InotifyWatcher::WaitReadable(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    struct pollfd pfd = {fd_.get(), POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    const int r = ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "poll inotify for " + root_);
    }
    return r > 0;
  }
}

}  // namespace sg

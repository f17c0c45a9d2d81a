#include "common/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/files.h"

namespace sg {

SystemdNotifier::SystemdNotifier(const std::map<std::string, std::string>& env) {
  if (auto it = env.find("NOTIFY_SOCKET"); it != env.end()) socket_path_ = it->second;
  auto usec = env.find("WATCHDOG_USEC");
  if (usec == env.end()) return;
  if (auto pid = env.find("WATCHDOG_PID");
      pid != env.end() && pid->second != std::to_string(::getpid())) {
    return;  // meant for another process
  }
  try {
    const long long us = std::stoll(usec->second);
    if (us > 0) watchdog_ = std::chrono::microseconds(us / 2);
  } catch (const std::exception&) {
  }
}

Status SystemdNotifier::Notify(std::string_view message) const {
  if (socket_path_.empty()) return Status::Ok();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path_.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("NOTIFY_SOCKET path is too long");
  }
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  const socklen_t len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path_.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::FromErrno(errno, "socket");
  ssize_t n;
  do {
    // Never block: a stalled receiver must not stall the agent's loop.
    n = ::sendto(fd.get(), message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT,
                 reinterpret_cast<const sockaddr*>(&addr), len);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Status::FromErrno(errno, "notify systemd at " + socket_path_);
  return Status::Ok();
}

void WatchdogPinger::Tick(Clock::MonoTime now) {
  const std::optional<std::chrono::microseconds> interval = notifier_.watchdog_interval();
  if (!interval || (next_ && now < *next_)) return;
  (void)notifier_.Notify("WATCHDOG=1");
  next_ = now + *interval;
}

}  // namespace sg

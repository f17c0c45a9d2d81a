// systemd's notification protocol (sd_notify(3)) without libsystemd: one
// datagram per message to the unix socket named by $NOTIFY_SOCKET ("@name"
// for the abstract namespace). Without $NOTIFY_SOCKET every call is a no-op.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace sg {

class SystemdNotifier {
 public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from `env`.
  explicit SystemdNotifier(const std::map<std::string, std::string>& env);

  bool enabled() const { return !socket_path_.empty(); }
  // Sends e.g. "READY=1", "STATUS=uploading 0000000042", "WATCHDOG=1", "STOPPING=1".
  Status Notify(std::string_view message) const;
  // How often to send WATCHDOG=1 (half of WATCHDOG_USEC), when systemd asks
  // for it and the request is meant for this process.
  std::optional<std::chrono::microseconds> watchdog_interval() const { return watchdog_; }

 private:
  std::string socket_path_;
  std::optional<std::chrono::microseconds> watchdog_;
};

// WATCHDOG=1 from an agent's main loop (docs/design.md §9): the loop calls
// Tick every time round and a ping goes out at the first Tick and then once
// per watchdog_interval (half of WATCHDOG_USEC); nothing without a watchdog.
// A loop held longer than WATCHDOG_USEC is what systemd's watchdog is for.
class WatchdogPinger {
 public:
  explicit WatchdogPinger(const SystemdNotifier& notifier) : notifier_(notifier) {}
  void Tick(Clock::MonoTime now);

 private:
  const SystemdNotifier& notifier_;
  std::optional<Clock::MonoTime> next_;
};

}  // namespace sg

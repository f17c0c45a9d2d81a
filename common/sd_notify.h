// systemd's notification protocol (sd_notify(3)) without libsystemd: one
// datagram per message to the unix socket named by $NOTIFY_SOCKET ("@name"
// for the abstract namespace). Without $NOTIFY_SOCKET every call is a no-op.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>

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

}  // namespace sg

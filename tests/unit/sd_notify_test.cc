#include "common/sd_notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "common/files.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

// A datagram socket bound where systemd's would be; returns its fd.
UniqueFd Listen(const std::string& path, bool abstract) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + (abstract ? 1 : 0), path.data(), path.size());
  const socklen_t len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + (abstract ? 1 : 0));
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len), 0) << std::strerror(errno);
  return fd;
}

std::string Receive(int fd) {
  char buf[256];
  ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
}

TEST(SystemdNotifier, SendsEachMessageAsOneDatagram) {
  testing::TempDir dir;
  const std::string path = dir.Join("notify.sock");
  UniqueFd sock = Listen(path, false);
  SystemdNotifier n({{"NOTIFY_SOCKET", path}});
  ASSERT_TRUE(n.enabled());
  ASSERT_TRUE(n.Notify("READY=1").ok());
  ASSERT_TRUE(n.Notify("STATUS=uploading 0000000042").ok());
  EXPECT_EQ(Receive(sock.get()), "READY=1");
  EXPECT_EQ(Receive(sock.get()), "STATUS=uploading 0000000042");
}

TEST(SystemdNotifier, UnderstandsTheAbstractNamespace) {
  const std::string name = "spotguard-test-" + RandomHex(4);
  UniqueFd sock = Listen(name, true);
  SystemdNotifier n({{"NOTIFY_SOCKET", "@" + name}});
  ASSERT_TRUE(n.Notify("STOPPING=1").ok());
  EXPECT_EQ(Receive(sock.get()), "STOPPING=1");
}

TEST(SystemdNotifier, WithoutASocketNothingIsSent) {
  SystemdNotifier n({});
  EXPECT_FALSE(n.enabled());
  EXPECT_TRUE(n.Notify("READY=1").ok());
  EXPECT_FALSE(n.watchdog_interval().has_value());
}

TEST(SystemdNotifier, PingsTheWatchdogAtHalfItsTimeoutWhenItIsForUs) {
  SystemdNotifier mine(
      {{"WATCHDOG_USEC", "20000000"}, {"WATCHDOG_PID", std::to_string(::getpid())}});
  ASSERT_TRUE(mine.watchdog_interval().has_value());
  EXPECT_EQ(*mine.watchdog_interval(), std::chrono::seconds(10));
  SystemdNotifier other({{"WATCHDOG_USEC", "20000000"}, {"WATCHDOG_PID", "1"}});
  EXPECT_FALSE(other.watchdog_interval().has_value());
}

TEST(WatchdogPinger, PingsAtTheFirstTickThenOncePerInterval) {
  testing::TempDir dir;
  const std::string path = dir.Join("notify.sock");
  UniqueFd sock = Listen(path, false);
  SystemdNotifier n({{"NOTIFY_SOCKET", path}, {"WATCHDOG_USEC", "8000000"}});
  WatchdogPinger pinger(n);
  const Clock::MonoTime t0{};
  pinger.Tick(t0 + std::chrono::seconds(100));
  EXPECT_EQ(Receive(sock.get()), "WATCHDOG=1");
  pinger.Tick(t0 + std::chrono::milliseconds(103'999));
  EXPECT_EQ(Receive(sock.get()), "");  // half of WATCHDOG_USEC is 4 s
  pinger.Tick(t0 + std::chrono::seconds(104));
  EXPECT_EQ(Receive(sock.get()), "WATCHDOG=1");
}

TEST(WatchdogPinger, WithoutAWatchdogNothingIsSent) {
  testing::TempDir dir;
  const std::string path = dir.Join("notify.sock");
  UniqueFd sock = Listen(path, false);
  SystemdNotifier n({{"NOTIFY_SOCKET", path}});
  WatchdogPinger pinger(n);
  pinger.Tick(Clock::MonoTime{});
  EXPECT_EQ(Receive(sock.get()), "");
}

}  // namespace
}  // namespace sg

#include "common/open_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/support/temp_dir.h"

namespace sg {
namespace {

TEST(FilesOpenForWriting, SeesWritersButNotReadersBelowTheDirectory) {
  testing::TempDir dir;
  testing::TempDir other;
  const std::string written = dir.WriteFile("sub/w.pt", "w");
  const std::string appended = dir.WriteFile("a.log", "a");
  const std::string read = dir.WriteFile("r.pt", "r");
  const std::string elsewhere = other.WriteFile("x.pt", "x");
  const int w = ::open(written.c_str(), O_WRONLY | O_CLOEXEC);
  const int a = ::open(appended.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  const int r = ::open(read.c_str(), O_RDONLY | O_CLOEXEC);
  const int x = ::open(elsewhere.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_TRUE(w >= 0 && a >= 0 && r >= 0 && x >= 0);

  auto open = FilesOpenForWriting(dir.path() + "/");
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  EXPECT_EQ(*open, (std::set<std::string>{appended, written}));

  ::close(w);
  ::close(a);
  ::close(r);
  ::close(x);
  EXPECT_TRUE(FilesOpenForWriting(dir.path())->empty());
}

}  // namespace
}  // namespace sg

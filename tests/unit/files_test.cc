#include "common/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/support/temp_dir.h"

namespace sg {
namespace {

StatusOr<UniqueFd> NewFile(const testing::TempDir& dir, const std::string& name) {
  return OpenFile(dir.Join(name), O_RDWR | O_CREAT | O_EXCL, 0600);
}

// The restore's files are allocated whole before their frames are written
// in any order: the size is right and the blocks are there (not a sparse
// file filled as written).
TEST(AllocateFile, SizesTheFileWithItsBlocksAllocated) {
  testing::TempDir dir;
  auto fd = NewFile(dir, "f");
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  const uint64_t size = (8u << 20) + 12345;
  ASSERT_TRUE(AllocateFile(fd->get(), size, "f").ok());
  struct stat st{};
  ASSERT_EQ(::fstat(fd->get(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), size);
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, size) << "blocks not allocated ahead";
}

TEST(AllocateFile, AnEmptyFileStaysEmpty) {
  testing::TempDir dir;
  auto fd = NewFile(dir, "empty");
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(AllocateFile(fd->get(), 0, "empty").ok());
  struct stat st{};
  ASSERT_EQ(::fstat(fd->get(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
}

// More than any disk holds fails at once, naming the file and the size.
TEST(AllocateFile, MoreThanTheDiskHoldsFailsNamingTheFile) {
  testing::TempDir dir;
  auto fd = NewFile(dir, "huge.pt");
  ASSERT_TRUE(fd.ok());
  const uint64_t size = 1ull << 50;  // 1 PiB
  Status st = AllocateFile(fd->get(), size, "ckpt/huge.pt");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ckpt/huge.pt"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(std::to_string(size) + " bytes"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace sg

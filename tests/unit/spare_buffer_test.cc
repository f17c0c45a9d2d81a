#include "common/spare_buffer.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace sg {
namespace {

// Each test runs on the main thread, whose spare the tests before it may
// have left: every test first takes whatever spare there is.
void DropSpare() { (void)TakeSpareBuffer(64u << 20); }

TEST(SpareBuffer, ABodyGivenBackIsTheMemoryOfTheNextOneThatFits) {
  DropSpare();
  std::string body(4u << 20, 'x');
  const char* memory = body.data();
  RecycleResponseBody(std::move(body));
  std::string next = TakeSpareBuffer(3u << 20);
  EXPECT_EQ(next.data(), memory);
  EXPECT_TRUE(next.empty()) << "the spare comes back empty, whatever it held";
  EXPECT_GE(next.capacity(), 4u << 20);
}

TEST(SpareBuffer, SmallOrLargerBodiesGetTheirOwnMemory) {
  DropSpare();
  std::string body(2u << 20, 'x');
  const char* memory = body.data();
  RecycleResponseBody(std::move(body));
  // Below 1 MiB the spare stays for a large body.
  std::string small = TakeSpareBuffer(1000);
  EXPECT_NE(small.data(), memory);
  EXPECT_GE(small.capacity(), 1000u);
  // Larger than the spare: new memory, reserved at its size.
  std::string larger = TakeSpareBuffer(3u << 20);
  EXPECT_NE(larger.data(), memory);
  EXPECT_GE(larger.capacity(), 3u << 20);
  // The spare is still there for one that fits.
  EXPECT_EQ(TakeSpareBuffer(2u << 20).data(), memory);
}

TEST(SpareBuffer, BodiesUnder1MiBOrOver64MiBAreNotKept) {
  DropSpare();
  std::string tiny(1000, 'x');
  tiny.shrink_to_fit();
  const char* tiny_memory = tiny.data();
  RecycleResponseBody(std::move(tiny));
  EXPECT_NE(TakeSpareBuffer(1u << 20).data(), tiny_memory);
  std::string huge;
  huge.reserve(65u << 20);
  const char* huge_memory = huge.data();
  RecycleResponseBody(std::move(huge));
  EXPECT_NE(TakeSpareBuffer(2u << 20).data(), huge_memory);
}

TEST(SharedBuffer, ABufferGivenBackOnOneThreadIsTakenOnAnother) {
  ReleaseSharedBuffers();
  std::string part;
  part.reserve(9u << 20);
  part.assign(5u << 20, 'p');
  const char* memory = part.data();
  std::thread([&] { GiveSharedBuffer(std::move(part)); }).join();
  std::string next;
  std::thread([&] { next = TakeSharedBuffer(8u << 20); }).join();
  EXPECT_EQ(next.data(), memory);
  EXPECT_EQ(next.size(), 5u << 20) << "as its last user left it: resizing costs no fill";
  ReleaseSharedBuffers();
}

TEST(SharedBuffer, TheSmallestIdleBufferThatFitsIsTaken) {
  ReleaseSharedBuffers();
  std::string small, large;
  small.reserve(8u << 20);
  large.reserve(17u << 20);
  const char* small_memory = small.data();
  const char* large_memory = large.data();
  GiveSharedBuffer(std::move(large));
  GiveSharedBuffer(std::move(small));
  EXPECT_EQ(TakeSharedBuffer(4u << 20).data(), small_memory);
  EXPECT_EQ(TakeSharedBuffer(16u << 20).data(), large_memory);
  // None idle fits: new memory, with room for what was asked.
  EXPECT_GE(TakeSharedBuffer(3u << 20).capacity(), 3u << 20);
}

TEST(SharedBuffer, SmallStringsNeverTakeAPooledBufferNorMuchSmallerOnesALargeOne) {
  ReleaseSharedBuffers();
  std::string large;
  large.reserve(18u << 20);
  const char* memory = large.data();
  GiveSharedBuffer(std::move(large));
  EXPECT_NE(TakeSharedBuffer(1000).data(), memory);
  EXPECT_NE(TakeSharedBuffer(2u << 20).data(), memory);
  EXPECT_EQ(SharedBufferIdleBytes(), 18u << 20);
  EXPECT_EQ(TakeSharedBuffer(8u << 20).data(), memory);
}

TEST(SharedBuffer, IdleBuffersAreBoundedAndReleasedAtTheEnd) {
  ReleaseSharedBuffers();
  for (int i = 0; i < 10; ++i) {
    std::string b;
    b.reserve(16u << 20);
    GiveSharedBuffer(std::move(b));
  }
  EXPECT_GT(SharedBufferIdleBytes(), kSharedIdleBytes - (16u << 20));
  EXPECT_LE(SharedBufferIdleBytes(), kSharedIdleBytes);
  ReleaseSharedBuffers();
  EXPECT_EQ(SharedBufferIdleBytes(), 0u);
  // Under 1 MiB is not kept.
  std::string small(1000, 'x');
  GiveSharedBuffer(std::move(small));
  EXPECT_EQ(SharedBufferIdleBytes(), 0u);
}

}  // namespace
}  // namespace sg

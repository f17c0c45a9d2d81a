#include "common/file_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>

#include "common/spare_buffer.h"
#include "tests/conformance/object_store_conformance.h"
#include "tests/support/random_bytes.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

std::shared_ptr<ObjectStore> MakeFileStore() {
  // One directory for the whole run; each conformance test uses its own prefix.
  static TempDir* dir = new TempDir();  // NOLINT: lives until exit
  auto store = FileStore::Open(dir->Join("store"));
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::shared_ptr<ObjectStore>(std::move(*store)) : nullptr;
}

INSTANTIATE_TEST_SUITE_P(File, ObjectStoreConformance,
                         ::testing::Values(StoreFactory{"file", MakeFileStore}),
                         [](const auto& info) { return info.param.name; });

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = FileStore::Open(dir_.Join("root"));
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(*opened);
  }
  size_t StagedFiles() {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e :
         std::filesystem::directory_iterator(dir_.Join("root/.spotguard-tmp"))) {
      ++n;
    }
    return n;
  }

  TempDir dir_;
  std::unique_ptr<FileStore> store_;
};

TEST_F(FileStoreTest, RejectsKeysThatWouldEscapeTheRoot) {
  for (const char* key : {"../outside", "a/../../b", "/etc/passwd", "a//b", "a/./b", "a/", "",
                          ".spotguard-tmp/x", ".spotguard-lock"}) {
    auto r = store_->Put(key, "x", PutCondition::None());
    EXPECT_TRUE(r.status().Is(StatusCode::kInvalidArgument)) << "key " << key;
    EXPECT_NE(r.status().message().find("key"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("outside")));
}

TEST_F(FileStoreTest, RequiresAnAbsoluteRoot) {
  EXPECT_TRUE(FileStore::Open("relative/dir").status().Is(StatusCode::kInvalidArgument));
}

TEST_F(FileStoreTest, ListingHidesTheStoresOwnFiles) {
  ASSERT_TRUE(store_->Put("job/x", "1", PutCondition::CreateOnly()).ok());
  auto all = ListAll(*store_, "");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].key, "job/x");
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("root/.spotguard-lock")));
}

TEST_F(FileStoreTest, LosingAPreconditionLeavesNoStagedFile) {
  ASSERT_TRUE(store_->Put("k", "1", PutCondition::CreateOnly()).ok());
  ASSERT_FALSE(store_->Put("k", "2", PutCondition::CreateOnly()).ok());
  ASSERT_FALSE(store_->Put("k", "3", PutCondition::IfMatch("stale")).ok());
  EXPECT_EQ(StagedFiles(), 0u);
}

TEST_F(FileStoreTest, DeleteRemovesDirectoriesItLeavesEmpty) {
  ASSERT_TRUE(store_->Put("job/snapshots/0000000001/files/a.zst", "a", PutCondition::None()).ok());
  ASSERT_TRUE(store_->Put("job/latest", "1", PutCondition::None()).ok());
  ASSERT_TRUE(store_->Delete("job/snapshots/0000000001/files/a.zst").ok());
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("root/job/snapshots")));
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("root/job/latest")));
}

TEST_F(FileStoreTest, EtagChangesOnEveryRewriteEvenWithTheSameSize) {
  // Fast rewrites of equal size can reuse the inode and land in one timestamp
  // tick; the etag must still change or If-Match would accept a stale writer.
  std::set<std::string> etags;
  for (int i = 0; i < 200; ++i) {
    auto etag = store_->Put("lease", "same-size", PutCondition::None());
    ASSERT_TRUE(etag.ok());
    etags.insert(*etag);
  }
  EXPECT_EQ(etags.size(), 200u);
}

TEST_F(FileStoreTest, ObjectsSurviveReopeningTheStore) {
  ASSERT_TRUE(store_->Put("a/b", "kept", PutCondition::None()).ok());
  store_.reset();
  auto reopened = FileStore::Open(dir_.Join("root"));
  ASSERT_TRUE(reopened.ok());
  ObjectStore& reopened_store = **reopened;
  auto got = reopened_store.Get("a/b");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "kept");
}

TEST_F(FileStoreTest, AKeyThatIsAlsoADirectoryIsRefusedWithoutDamage) {
  ASSERT_TRUE(store_->Put("a/b", "child", PutCondition::None()).ok());
  EXPECT_FALSE(store_->Put("a", "parent", PutCondition::None()).ok());
  EXPECT_EQ(*static_cast<ObjectStore&>(*store_).Get("a/b"), "child");
  EXPECT_EQ(StagedFiles(), 0u);
}

TEST_F(FileStoreTest, StaleStagedFilesOfADeadWriterAreCleaned) {
  // What a writer killed mid-object leaves: a staged file nobody will commit.
  dir_.WriteFile("root/.spotguard-tmp/0123456789abcdef", "partial");
  ASSERT_EQ(StagedFiles(), 1u);
  auto young = store_->CleanStaleWrites("", std::chrono::hours(1), {});
  ASSERT_TRUE(young.ok());
  EXPECT_EQ(*young, 0);
  auto old = store_->CleanStaleWrites("", std::chrono::seconds(0), {});
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(*old, 1);
  EXPECT_EQ(StagedFiles(), 0u);
  EXPECT_TRUE(store_->Head("big").status().Is(StatusCode::kNotFound));
}

// Two jobs in one store: a gc of job a (its prefix) leaves job b's upload in
// progress alone, however old it looks, and however long its key.
TEST_F(FileStoreTest, AGcOfOneJobLeavesAnotherJobsUploadInProgressAlone) {
  const std::string long_key = "b/" + std::string(120, 'd') + "/" + std::string(120, 'e') + "/f%";
  auto a = store_->NewWriter("a/snapshots/1/data");
  auto b = store_->NewWriter("b/snapshots/1/data");
  auto b_long = store_->NewWriter(long_key);
  auto ab = store_->NewWriter("ab/snapshots/1/data");  // "a" is not a prefix of job "ab"
  ASSERT_TRUE(a.ok() && b.ok() && b_long.ok() && ab.ok());
  for (auto* w : {&*a, &*b, &*b_long, &*ab}) ASSERT_TRUE((*w)->Append("part").ok());
  ASSERT_EQ(StagedFiles(), 4u);
  // Every staged file counts as stale (the cutoff is in the future).
  auto removed = store_->CleanStaleWrites("a/", std::chrono::seconds(-3600), {});
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, 1);
  EXPECT_EQ(StagedFiles(), 3u);
  EXPECT_TRUE((*b)->Commit().ok());
  EXPECT_TRUE((*b_long)->Commit().ok());
  EXPECT_TRUE((*ab)->Commit().ok());
  EXPECT_FALSE((*a)->Commit().ok());  // its staged file was job a's own, and stale
  EXPECT_TRUE(store_->Head(long_key).ok());
  // The long key's staged file names only its head, enough to tell its job.
  auto c_long = store_->NewWriter(long_key);
  ASSERT_TRUE(c_long.ok());
  EXPECT_EQ(*store_->CleanStaleWrites("a/", std::chrono::seconds(-3600), {}), 0);
  EXPECT_EQ(*store_->CleanStaleWrites("b/", std::chrono::seconds(-3600), {}), 1);
}

TEST_F(FileStoreTest, ListRefusesAPrefixThatClimbsOut) {
  EXPECT_TRUE(store_->List("../", "", 10).status().Is(StatusCode::kInvalidArgument));
}

}  // namespace
// A large range is read into the body given back before it, as an S3 body
// is (common/spare_buffer.h): a restore's worker holds one range at a time.
// Each range is exactly its own bytes, a shorter one after a longer one
// included.
TEST_F(FileStoreTest, ALargeRangeIsReadIntoTheRecycledBody) {
  const std::string data = RandomBytes(5u << 20, 7);
  ObjectStore& store = *store_;  // the interface's defaults
  ASSERT_TRUE(store.Put("obj", data, PutCondition::None()).ok());
  auto first = store.Get("obj", ByteRange{0, 3u << 20});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(*first, data.substr(0, 3u << 20));
  const char* memory = first->data();
  RecycleResponseBody(std::move(*first));
  auto second = store.Get("obj", ByteRange{12345, 2u << 20});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(*second, data.substr(12345, 2u << 20));
  EXPECT_EQ(second->data(), memory) << "read into a new buffer, not the recycled one";
  // Larger than the spare: new memory, and still exactly the bytes.
  auto whole = store.Get("obj");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(*whole, data);
}

}  // namespace sg::testing

// A restore is cancelled cleanly (agent/repo/restorer.h, RestoreOptions::cancel):
// a ranged read that waits for bytes that never come ends once the flag is
// set (the transport asks the sink with no bytes meanwhile,
// common/body_sink.h), the temporary dir is removed and the target is left
// as it was. The store here stalls the way a relay that holds the body does:
// it hands the sink nothing but empty pieces until the sink says stop.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "agent/repo/restorer.h"
#include "tests/support/file_store_fixture.h"
#include "tests/support/random_bytes.h"

namespace sg::testing {
namespace {

class StallingStore final : public ObjectStore {
 public:
  explicit StallingStore(ObjectStore& base) : base_(base) {}

  // Waits (30 s at most) until a ranged read is stalled.
  bool WaitForStall() {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(30), [&] { return stalled_ > 0; });
  }
  int ended_by_sink() const { return ended_by_sink_; }

  Status GetTo(const std::string& /*key*/, ByteRange /*range*/, const BodySink& sink) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stalled_;
      changed_.notify_all();
    }
    // As a transport's progress calls do while no byte comes (bounded, so
    // that a broken seam fails the test instead of hanging it).
    for (int i = 0; i < 3000; ++i) {
      if (Status st = sink(0, std::string_view()); !st.ok()) {
        ++ended_by_sink_;
        return st;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Status::Unavailable("stalled for 30 s");
  }
  StatusOr<std::string> Get(const std::string& key, std::optional<ByteRange> range,
                            ObjectInfo* info) override {
    // Ranged reads of the data stall too; the manifest and listings pass.
    if (range && key.find("/files/") != std::string::npos) {
      std::string got;
      SG_RETURN_IF_ERROR(GetTo(key, *range, [&](uint64_t, std::string_view b) {
        got.append(b);
        return Status::Ok();
      }));
      return got;
    }
    return base_.Get(key, range, info);
  }
  StatusOr<std::string> Put(const std::string& key, std::string_view data,
                            const PutCondition& c) override {
    return base_.Put(key, data, c);
  }
  StatusOr<ObjectInfo> Head(const std::string& key) override { return base_.Head(key); }
  StatusOr<ListPage> List(const std::string& p, const std::string& t, int n) override {
    return base_.List(p, t, n);
  }
  Status Delete(const std::string& key) override { return base_.Delete(key); }
  StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& key,
                                                    uint64_t size_hint = 0) override {
    return base_.NewWriter(key, size_hint);
  }
  StatusOr<int> CleanStaleWrites(const std::string& p, std::chrono::seconds age,
                                 const KeyFilter& spare) override {
    return base_.CleanStaleWrites(p, age, spare);
  }
  std::string Describe() const override { return "stalling"; }

 private:
  ObjectStore& base_;
  std::mutex mu_;
  std::condition_variable changed_;
  int stalled_ = 0;
  std::atomic<int> ended_by_sink_{0};
};

class RestoreCancelTest : public FileStoreTest {};

TEST_F(RestoreCancelTest, ACancelEndsAStalledReadRemovesTheTempDirAndLeavesTheTarget) {
  ASSERT_TRUE(CommitTree({{"model.pt", {RandomBytes(20u << 20, 3), 0644}}}).ok());
  const std::string target = dir_.Join("ckpt");
  WriteTree(target, {{"notes.txt", {"mine\n", 0644}}});
  StallingStore stalling(*store_);
  std::atomic<bool> cancel{false};
  RestoreOptions options;
  options.cancel = &cancel;
  options.replace_foreign = true;
  std::optional<StatusOr<RestoreResult>> result;
  std::thread restore(
      [&] { result.emplace(Restorer(stalling, options).Restore("job", target, {})); });
  ASSERT_TRUE(stalling.WaitForStall());
  cancel = true;
  restore.join();
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->status().Is(StatusCode::kCancelled)) << result->status().ToString();
  EXPECT_GE(stalling.ended_by_sink(), 1) << "the stalled read was ended by the sink";
  EXPECT_EQ(ReadTree(target), (Tree{{"notes.txt", {"mine\n", 0644}}}));
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find("spotguard-restore"), std::string::npos) << name;
    EXPECT_EQ(name.find("spotguard-backup"), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace sg::testing

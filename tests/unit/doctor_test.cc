// The doctor's checks on fake stores and transports: a store that ignores
// create-only or If-Match conditions FAILs those checks, a skewed store clock
// warns or fails, an unreachable store fails every store check, probe objects
// are always removed, and the IMDS and disk verdicts.
#include <gtest/gtest.h>

#include <deque>

#include "agent/cli/doctor_command.h"
#include "common/file_store.h"
#include "tests/support/fake_clock.h"
#include "tests/support/scripted_transport.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

// Passes everything to a real store; subclasses break one thing.
class ForwardingStore : public ObjectStore {
 public:
  explicit ForwardingStore(ObjectStore& base) : base_(base) {}
  StatusOr<std::string> Put(const std::string& key, std::string_view data,
                            const PutCondition& condition) override {
    return base_.Put(key, data, condition);
  }
  StatusOr<std::string> Get(const std::string& key, std::optional<ByteRange> range,
                            ObjectInfo* info) override {
    return base_.Get(key, range, info);
  }
  StatusOr<ObjectInfo> Head(const std::string& key) override { return base_.Head(key); }
  StatusOr<ListPage> List(const std::string& prefix, const std::string& token,
                          int max_keys) override {
    return base_.List(prefix, token, max_keys);
  }
  Status Delete(const std::string& key) override { return base_.Delete(key); }
  StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& key,
                                                    uint64_t size_hint = 0) override {
    return base_.NewWriter(key, size_hint);
  }
  StatusOr<int> CleanStaleWrites(const std::string& prefix, std::chrono::seconds age,
                                 const KeyFilter& spare) override {
    return base_.CleanStaleWrites(prefix, age, spare);
  }
  std::string Describe() const override { return "fake://" + base_.Describe(); }

 protected:
  ObjectStore& base_;
};

// An S3-compatible server that ignores If-None-Match: *.
class IgnoresCreateOnly final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  StatusOr<std::string> Put(const std::string& key, std::string_view data,
                            const PutCondition& condition) override {
    if (condition.kind == PutCondition::Kind::kCreateOnly) {
      return base_.Put(key, data, PutCondition::None());
    }
    return base_.Put(key, data, condition);
  }
};

// One that ignores If-Match.
class IgnoresIfMatch final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  StatusOr<std::string> Put(const std::string& key, std::string_view data,
                            const PutCondition& condition) override {
    if (condition.kind == PutCondition::Kind::kIfMatch) {
      return base_.Put(key, data, PutCondition::None());
    }
    return base_.Put(key, data, condition);
  }
};

// Objects look modified `offset` away from the time they were written.
class SkewedStore final : public ForwardingStore {
 public:
  SkewedStore(ObjectStore& base, std::chrono::seconds offset)
      : ForwardingStore(base), offset_(offset) {}
  StatusOr<ObjectInfo> Head(const std::string& key) override {
    SG_ASSIGN_OR_RETURN(ObjectInfo info, base_.Head(key));
    info.modified += offset_;
    return info;
  }

 private:
  const std::chrono::seconds offset_;
};

// Nothing answers.
class DownStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  StatusOr<std::string> Put(const std::string&, std::string_view, const PutCondition&) override {
    return Down();
  }
  StatusOr<std::string> Get(const std::string&, std::optional<ByteRange>, ObjectInfo*) override {
    return Down();
  }
  StatusOr<ObjectInfo> Head(const std::string&) override { return Down(); }
  StatusOr<ListPage> List(const std::string&, const std::string&, int) override { return Down(); }
  Status Delete(const std::string&) override { return Down(); }

 private:
  static Status Down() { return Status::Unavailable("connection refused (injected)"); }
};

const DoctorCheck* Find(const std::vector<DoctorCheck>& checks, const std::string& name) {
  for (const DoctorCheck& c : checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

class DoctorStoreTest : public ::testing::Test {
 protected:
  DoctorStoreTest() {
    auto store = FileStore::Open(dir_.Join("store"));
    EXPECT_TRUE(store.ok());
    base_ = std::move(*store);
  }
  // The file store's times are the real clock's.
  Clock& clock() { return SystemClock(); }
  size_t ProbesLeft() {
    auto all = ListAll(*base_, "job/.doctor/");
    EXPECT_TRUE(all.ok());
    return all.ok() ? all->size() : 0;
  }

  testing::TempDir dir_;
  std::unique_ptr<FileStore> base_;
};

TEST_F(DoctorStoreTest, AnHonestStorePassesEveryCheckAndKeepsNoProbes) {
  auto checks = CheckStore(*base_, "job", clock());
  ASSERT_EQ(checks.size(), 5u);
  for (const DoctorCheck& c : checks) {
    EXPECT_EQ(c.state, CheckState::kOk) << FormatCheck(c);
  }
  EXPECT_EQ(ProbesLeft(), 0u);
}

TEST_F(DoctorStoreTest, AStoreIgnoringCreateOnlyFailsThatCheck) {
  IgnoresCreateOnly store(*base_);
  auto checks = CheckStore(store, "job", clock());
  const DoctorCheck* c = Find(checks, "create-only");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->state, CheckState::kFail);
  EXPECT_NE(c->detail.find("ignores If-None-Match"), std::string::npos) << c->detail;
  EXPECT_EQ(Find(checks, "if-match")->state, CheckState::kOk);
  EXPECT_EQ(Find(checks, "write")->state, CheckState::kOk);
  EXPECT_EQ(ProbesLeft(), 0u);
}

TEST_F(DoctorStoreTest, AStoreIgnoringIfMatchFailsThatCheck) {
  IgnoresIfMatch store(*base_);
  auto checks = CheckStore(store, "job", clock());
  const DoctorCheck* c = Find(checks, "if-match");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->state, CheckState::kFail);
  EXPECT_NE(c->detail.find("STALE etag succeeded"), std::string::npos) << c->detail;
  EXPECT_EQ(Find(checks, "create-only")->state, CheckState::kOk);
  EXPECT_EQ(ProbesLeft(), 0u);
}

TEST_F(DoctorStoreTest, ASkewedStoreClockWarnsAfterAMinuteAndFailsAfterFive) {
  SkewedStore two_minutes(*base_, std::chrono::seconds(120));
  const DoctorCheck* warn = nullptr;
  auto checks = CheckStore(two_minutes, "job", clock());
  warn = Find(checks, "clock");
  ASSERT_NE(warn, nullptr);
  EXPECT_EQ(warn->state, CheckState::kWarn) << warn->detail;
  EXPECT_NE(warn->detail.find("ahead of"), std::string::npos) << warn->detail;

  SkewedStore ten_minutes_behind(*base_, std::chrono::seconds(-600));
  auto checks2 = CheckStore(ten_minutes_behind, "job", clock());
  EXPECT_EQ(Find(checks2, "clock")->state, CheckState::kFail) << Find(checks2, "clock")->detail;

  SkewedStore no_skew(*base_, std::chrono::seconds(0));
  EXPECT_EQ(Find(CheckStore(no_skew, "job", clock()), "clock")->state, CheckState::kOk);
  EXPECT_EQ(ProbesLeft(), 0u);
}

TEST_F(DoctorStoreTest, AnUnreachableStoreFailsEveryCheckAndSaysSo) {
  DownStore store(*base_);
  auto checks = CheckStore(store, "job", clock());
  int failed = 0;
  for (const DoctorCheck& c : checks) {
    if (c.state == CheckState::kFail) {
      ++failed;
      EXPECT_NE(c.detail.find("connection refused"), std::string::npos) << FormatCheck(c);
    }
  }
  EXPECT_EQ(failed, 5);
}

TEST(DoctorFormat, OneLinePerCheckWithAFixedWidthState) {
  EXPECT_EQ(FormatCheck({"store", CheckState::kOk, "fine"}), "ok    store: fine");
  EXPECT_EQ(FormatCheck({"imds", CheckState::kWarn, "x"}), "warn  imds: x");
  EXPECT_EQ(FormatCheck({"create-only", CheckState::kFail, "y"}), "FAIL  create-only: y");
}

TEST(DoctorClock, Thresholds) {
  EXPECT_EQ(JudgeClockSkew(std::chrono::seconds(0)).state, CheckState::kOk);
  EXPECT_EQ(JudgeClockSkew(std::chrono::seconds(60)).state, CheckState::kOk);
  EXPECT_EQ(JudgeClockSkew(std::chrono::seconds(-61)).state, CheckState::kWarn);
  EXPECT_EQ(JudgeClockSkew(std::chrono::seconds(300)).state, CheckState::kWarn);
  EXPECT_EQ(JudgeClockSkew(std::chrono::seconds(301)).state, CheckState::kFail);
  EXPECT_NE(JudgeClockSkew(std::chrono::seconds(-90)).detail.find("90s behind"), std::string::npos);
}

TEST(DoctorDisk, Thresholds) {
  constexpr uint64_t GiB = 1ull << 30;
  EXPECT_EQ(JudgeFreeSpace("/d", 50 * GiB, std::nullopt).state, CheckState::kOk);
  EXPECT_EQ(JudgeFreeSpace("/d", 9 * GiB, std::nullopt).state, CheckState::kWarn);
  EXPECT_EQ(JudgeFreeSpace("/d", 50 * GiB, 20 * GiB).state, CheckState::kOk);
  EXPECT_EQ(JudgeFreeSpace("/d", 50 * GiB, 30 * GiB).state, CheckState::kWarn);
  auto fail = JudgeFreeSpace("/d", 50 * GiB, 60 * GiB);
  EXPECT_EQ(fail.state, CheckState::kFail);
  EXPECT_NE(fail.detail.find("would not fit"), std::string::npos) << fail.detail;
}

TEST(DoctorDisk, AMissingDirIsMeasuredAtItsNearestParent) {
  testing::TempDir dir;
  auto c = CheckFreeSpace(dir.Join("not/yet/here"), std::nullopt);
  EXPECT_NE(c.state, CheckState::kFail) << c.detail;
  EXPECT_NE(c.detail.find("does not exist yet; measured " + dir.path()), std::string::npos)
      << c.detail;
}

using testing::ScriptedTransport;

ImdsClient::Options Imds() {
  ImdsClient::Options o;
  o.endpoint = "http://169.254.169.254";
  return o;
}

TEST(DoctorImds, NoAnswerIsAWarningNotAFailure) {
  ScriptedTransport t;
  testing::FakeClock clock;
  auto c = CheckImds(t, clock, Imds());
  EXPECT_EQ(c.state, CheckState::kWarn);
  EXPECT_NE(c.detail.find("not on EC2 or IMDS disabled"), std::string::npos) << c.detail;
}

TEST(DoctorImds, DisabledSendsNothing) {
  ScriptedTransport t;
  testing::FakeClock clock;
  ImdsClient::Options o = Imds();
  o.disabled = true;
  auto c = CheckImds(t, clock, o);
  EXPECT_EQ(c.state, CheckState::kWarn);
  EXPECT_TRUE(t.sent.empty());
}

TEST(DoctorImds, ForbiddenTokenIsAWarningAndOtherErrorsFail) {
  testing::FakeClock clock;
  ScriptedTransport forbidden;
  forbidden.Reply(403, "");
  EXPECT_EQ(CheckImds(forbidden, clock, Imds()).state, CheckState::kWarn);
  ScriptedTransport v1_only;
  v1_only.Reply(405, "");
  auto c = CheckImds(v1_only, clock, Imds());
  EXPECT_EQ(c.state, CheckState::kFail);
  EXPECT_NE(c.detail.find("HTTP 405"), std::string::npos) << c.detail;
}

TEST(DoctorImds, ATokenAndAnIdentityAreOk) {
  testing::FakeClock clock;
  ScriptedTransport t;
  t.Reply(200, "probe-token");
  t.Reply(200, "client-token");
  t.Reply(200, R"({"instanceId":"i-0abc","region":"eu-west-1","availabilityZone":"eu-west-1b",
                   "instanceType":"g5.xlarge"})");
  t.Reply(200, "spot");
  auto c = CheckImds(t, clock, Imds());
  EXPECT_EQ(c.state, CheckState::kOk) << c.detail;
  EXPECT_NE(c.detail.find("instance i-0abc (g5.xlarge, eu-west-1b, spot)"), std::string::npos)
      << c.detail;
}

}  // namespace
}  // namespace sg

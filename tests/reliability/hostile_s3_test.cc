// `spotguard ls`, `snapshot` and `gc` against a hostile S3 server
// (tests/tools/hostile_s3.py) that answers ListObjectsV2,
// CreateMultipartUpload, CompleteMultipartUpload and ListMultipartUploads
// with malformed, truncated, looping or huge XML: a clear error naming the
// operation, exit 1, no crash (no signal), no hang (the run's timeout).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/files.h"
#include "common/object_store.h"
#include "tests/support/random_bytes.h"
#include "tests/support/reliability_record.h"
#include "tests/support/s3_test_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

using nlohmann::json;

struct Answer {
  std::string name;
  std::string op;  // list, initiate, complete, uploads
  json answer;     // body, status, repeat_body_mb, prefix, suffix
  std::string what;
};

class HostileS3 : public ::testing::Test {
 public:
  CommandResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), SPOTGUARD_BIN);
    return RunCommand(args,
                      {{"SPOTGUARD_CONFIG", ""},
                       {"SPOTGUARD_JOB", "job"},
                       {"SPOTGUARD_STORE", "s3://bucket/prefix"},
                       {"SPOTGUARD_ENDPOINT", server_.endpoint()},
                       {"SPOTGUARD_REGION", "us-east-1"},
                       {"AWS_ACCESS_KEY_ID", "AKIDHOSTILE"},
                       {"AWS_SECRET_ACCESS_KEY", "hostile-secret-not-checked"},
                       {"AWS_SESSION_TOKEN", ""},
                       {"AWS_PROFILE", ""},
                       {"AWS_EC2_METADATA_DISABLED", "true"}},
                      std::chrono::seconds(120));
  }
  void SetAnswer(const std::string& op, json a) {
    a["op"] = op;
    server_.Control("POST", "/_sim/answer", a.dump());
  }
  void Normal() { server_.Control("DELETE", "/_sim/answer"); }

  ToolServer server_{"hostile_s3.py"};
  TempDir dir_;
};

const std::string kXml = R"(<?xml version="1.0" encoding="UTF-8"?>)";

TEST_F(HostileS3, MalformedAnswersGiveClearErrorsNotCrashesOrHangs) {
  // A file bigger than one part, so that snapshot uploads it in parts.
  WriteTree(dir_.Join("ckpt"),
            {{"model.pt", {RandomBytes(9u << 20, 7), 0644}}, {"small.txt", {"small", 0644}}});
  const std::vector<struct Answer> answers = {
      {"list: not XML", "list", {{"body", "this is not XML at all"}}, "ListObjectsV2"},
      {"list: truncated XML",
       "list",
       {{"body", kXml + "<ListBucketResult><Contents><Key>prefix/job/snap"}},
       "ListObjectsV2"},
      {"list: wrong root", "list", {{"body", kXml + "<Foo/>"}}, "no ListBucketResult"},
      {"list: an <Error> in a 200",
       "list",
       {{"body", kXml + "<Error><Code>InternalError</Code></Error>"}},
       "no ListBucketResult"},
      {"list: truncated without token",
       "list",
       {{"body", kXml + "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"}},
       "without NextContinuationToken"},
      {"list: the same token forever",
       "list",
       {{"body", kXml + "<ListBucketResult><IsTruncated>true</IsTruncated>"
                        "<NextContinuationToken>same</NextContinuationToken></ListBucketResult>"}},
       "does not advance"},
      {"list: keys outside the prefix",
       "list",
       {{"body", kXml + "<ListBucketResult><Contents><Key>../../etc/passwd</Key><Size>1</Size>"
                        "</Contents></ListBucketResult>"}},
       "outside the requested prefix"},
      {"list: 16 MiB of keys outside the prefix",
       "list",
       {{"prefix", kXml + "<ListBucketResult>"},
        {"body", "<Contents><Key>other/x</Key><Size>18446744073709551615</Size></Contents>"},
        {"repeat_body_mb", 16},
        {"suffix", "</ListBucketResult>"}},
       "outside the requested prefix"},
      {"list: 8 MiB of nesting",
       "list",
       {{"prefix", kXml}, {"body", "<a>"}, {"repeat_body_mb", 8}},
       "ListObjectsV2"},
      // U+00FF U+00FE U+0000 ... sent as the raw bytes ff fe 00 (latin-1).
      {"list: binary",
       "list",
       {{"body", std::string("\xc3\xbf\xc3\xbe") + '\0' + "<\x01>"}, {"latin1", true}},
       "ListObjectsV2"},
      {"initiate: not XML",
       "initiate",
       {{"body", "{\"UploadId\": \"u1\"}"}},
       "CreateMultipartUpload"},
      {"initiate: no UploadId",
       "initiate",
       {{"body", kXml + "<InitiateMultipartUploadResult><Key>k</Key>"
                        "</InitiateMultipartUploadResult>"}},
       "no UploadId"},
      {"complete: truncated",
       "complete",
       {{"body", kXml + "<CompleteMultipartUploadResult><ETag>\"abc"}},
       "CompleteMultipartUpload"},
      {"complete: wrong root",
       "complete",
       {{"body", kXml + "<Whatever/>"}},
       "CompleteMultipartUpload"},
      {"uploads: not XML", "uploads", {{"body", "<<<<"}}, "ListMultipartUploads"},
      {"uploads: truncated without markers",
       "uploads",
       {{"body", kXml + "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
                        "</ListMultipartUploadsResult>"}},
       "without markers"},
      {"uploads: the same markers forever",
       "uploads",
       {{"body", kXml + "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
                        "<NextKeyMarker>same</NextKeyMarker><NextUploadIdMarker>same"
                        "</NextUploadIdMarker></ListMultipartUploadsResult>"}},
       "does not advance"},
  };
  int clear = 0;
  for (const auto& a : answers) {
    SCOPED_TRACE(a.name);
    Normal();
    SetAnswer(a.op, a.answer);
    CommandResult r;
    if (a.op == "list") {
      r = Run({"ls"});
    } else if (a.op == "uploads") {
      r = Run({"gc", "--job", "job"});
    } else {
      r = Run({"snapshot", "--dir", dir_.Join("ckpt")});
    }
    EXPECT_EQ(r.exit_code, 1) << r.err;  // not 128+signal, not the timeout's kill
    EXPECT_NE(r.err.find(a.what), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("hostile-secret-not-checked"), std::string::npos) << r.err;
    if (r.exit_code == 1 && r.err.find(a.what) != std::string::npos) ++clear;
  }
  // After all that, the (now normal) server still takes a snapshot: nothing
  // half-written was left in a state that blocks the job.
  Normal();
  auto snap = Run({"snapshot", "--dir", dir_.Join("ckpt")});
  EXPECT_EQ(snap.exit_code, 0) << snap.err;

  ReliabilityRecord rec;
  rec.test = "hostile_s3_answers";
  rec.area = "hostile";
  rec.faults =
      "malformed, truncated, looping, out-of-prefix and 8-16 MiB XML answers to "
      "ListObjectsV2, Create/CompleteMultipartUpload, ListMultipartUploads";
  rec.trials = static_cast<long>(answers.size()) + 1;
  rec.faults_injected = static_cast<long>(answers.size());
  rec.committed = snap.exit_code == 0 ? 1 : 0;
  rec.detail = std::to_string(clear) + " of " + std::to_string(answers.size()) +
               " refused with exit 1 naming the operation (ls, snapshot, gc); no crash, no hang";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

// Hostile snapshots on the Ceph gateway: snapshot 1 taken by the binary,
// then its manifest or object rewritten through the S3 API; restore and
// verify refuse it and leave the target and its sibling alone.
TEST(HostileSnapshotOnS3, CraftedSnapshotsOnTheGatewayAreRefused) {
  S3TestEnv env;
  ASSERT_TRUE(LoadS3TestEnv(&env));
  TempDir dir;
  const std::string prefix = "hostile-tests/" + RandomHex(6);
  std::unique_ptr<ObjectStore> store = OpenTestS3Store(env, prefix);
  ASSERT_NE(store, nullptr);
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), SPOTGUARD_BIN);
    std::map<std::string, std::string> vars = env.AwsEnv();
    vars["SPOTGUARD_CONFIG"] = "";
    vars["SPOTGUARD_JOB"] = "job";
    vars["SPOTGUARD_STORE"] = "s3://" + env.bucket + "/" + prefix;
    vars["SPOTGUARD_ENDPOINT"] = env.endpoint;
    vars["SPOTGUARD_REGION"] = env.region;
    vars["AWS_EC2_METADATA_DISABLED"] = "true";
    return RunCommand(args, vars, std::chrono::seconds(120));
  };
  const Tree previous = {{"step_5.pt", {"previous", 0644}}};
  const Tree sentinel = {{"keep.txt", {"never changes", 0600}}};
  WriteTree(dir.Join("work/ckpt"), previous);
  WriteTree(dir.Join("work/sentinel"), sentinel);
  WriteTree(dir.Join("src"), {{"small.txt", {std::string(5000, 's'), 0644}}});
  const std::string manifest_key = "job/snapshots/0000000001/manifest.json";
  const std::string object_key = "job/snapshots/0000000001/files/small.txt.zst";

  struct Case {
    std::string name, what;
    std::function<void()> apply;
  };
  auto rewrite = [&](const std::function<void(json&)>& change) {
    auto text = store->Get(manifest_key);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    json j = json::parse(*text);
    change(j);
    ASSERT_TRUE(store->Put(manifest_key, j.dump(), PutCondition{}).ok());
  };
  const std::vector<Case> cases = {
      {"path with ..", "climbs out",
       [&] { rewrite([](json& j) { j["files"][0]["path"] = "../sentinel/keep.txt"; }); }},
      {"absolute path", "is absolute",
       [&] { rewrite([&](json& j) { j["files"][0]["path"] = dir.Join("escaped"); }); }},
      {"wrong sha256", "SHA-256",
       [&] {
         rewrite([](json& j) {
           json& frame = j["files"][0]["frames"][0];  // restore checks SHA-256 without xxh3
           frame.erase("xxh3");
           frame["sha256"] = std::string(64, 'a');
         });
       }},
      {"truncated object", "small.txt",
       [&] {
         auto bytes = store->Get(object_key);
         ASSERT_TRUE(bytes.ok());
         ASSERT_TRUE(
             store->Put(object_key, bytes->substr(0, bytes->size() - 9), PutCondition{}).ok());
       }},
  };
  int refused = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto old = ListAll(*store, "job/");
    ASSERT_TRUE(old.ok()) << old.status().ToString();
    for (const ObjectInfo& o : *old) ASSERT_TRUE(store->Delete(o.key).ok());
    auto snap = run({"snapshot", "--dir", dir.Join("src")});
    ASSERT_EQ(snap.exit_code, 0) << snap.err;
    c.apply();
    auto restore = run({"restore", "--to", dir.Join("work/ckpt")});
    auto verify = run({"verify", "--snapshot", "1"});
    EXPECT_EQ(restore.exit_code, 1) << restore.err;
    EXPECT_NE(restore.err.find(c.what), std::string::npos) << restore.err;
    EXPECT_EQ(verify.exit_code, 1) << verify.err;
    EXPECT_NE(verify.err.find(c.what), std::string::npos) << verify.err;
    EXPECT_EQ(ReadTree(dir.Join("work/ckpt")), previous);
    EXPECT_EQ(ReadTree(dir.Join("work/sentinel")), sentinel);
    EXPECT_FALSE(std::filesystem::exists(dir.Join("escaped")));
    EXPECT_EQ(restore.err.find(env.secret_key), std::string::npos);
    if (restore.exit_code == 1 && verify.exit_code == 1 &&
        ReadTree(dir.Join("work/ckpt")) == previous) {
      ++refused;
    }
  }
  auto left = ListAll(*store, "");
  ASSERT_TRUE(left.ok());
  for (const ObjectInfo& o : *left) EXPECT_TRUE(store->Delete(o.key).ok());

  ReliabilityRecord rec;
  rec.test = "hostile_snapshots_s3";
  rec.area = "hostile";
  rec.faults =
      "crafted snapshots on the Ceph gateway: .., absolute path, bad sha256, truncated object";
  rec.trials = 2L * static_cast<long>(cases.size());
  rec.faults_injected = static_cast<long>(cases.size());
  rec.committed = static_cast<long>(cases.size());
  rec.lost = refused == static_cast<int>(cases.size()) ? 0 : 1;
  rec.detail = std::to_string(refused) + " of " + std::to_string(cases.size()) +
               " refused by restore and verify with exit 1; target and sibling unchanged";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

}  // namespace
}  // namespace sg::testing

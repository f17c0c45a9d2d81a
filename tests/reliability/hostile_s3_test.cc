// `spotguard ls`, `snapshot` and `gc` against a hostile S3 server
// (tests/tools/hostile_s3.py) that answers ListObjectsV2,
// CreateMultipartUpload, CompleteMultipartUpload and ListMultipartUploads
// with malformed, truncated, looping or huge XML: a clear error naming the
// operation, exit 1, no crash (no signal), no hang (the run's timeout).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/random_bytes.h"
#include "tests/support/reliability_record.h"
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
  WriteTree(dir_.Join("ckpt"), {{"model.pt", {RandomBytes(9u << 20, 7), 0644}},
                                {"small.txt", {"small", 0644}}});
  const std::vector<struct Answer> answers = {
      {"list: not XML", "list", {{"body", "this is not XML at all"}}, "ListObjectsV2"},
      {"list: truncated XML", "list",
       {{"body", kXml + "<ListBucketResult><Contents><Key>prefix/job/snap"}}, "ListObjectsV2"},
      {"list: wrong root", "list", {{"body", kXml + "<Foo/>"}}, "no ListBucketResult"},
      {"list: an <Error> in a 200", "list",
       {{"body", kXml + "<Error><Code>InternalError</Code></Error>"}}, "no ListBucketResult"},
      {"list: truncated without token", "list",
       {{"body", kXml + "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"}},
       "without NextContinuationToken"},
      {"list: the same token forever", "list",
       {{"body", kXml + "<ListBucketResult><IsTruncated>true</IsTruncated>"
                        "<NextContinuationToken>same</NextContinuationToken></ListBucketResult>"}},
       "does not advance"},
      {"list: keys outside the prefix", "list",
       {{"body", kXml + "<ListBucketResult><Contents><Key>../../etc/passwd</Key><Size>1</Size>"
                        "</Contents></ListBucketResult>"}},
       "outside the requested prefix"},
      {"list: 16 MiB of keys outside the prefix", "list",
       {{"prefix", kXml + "<ListBucketResult>"},
        {"body", "<Contents><Key>other/x</Key><Size>18446744073709551615</Size></Contents>"},
        {"repeat_body_mb", 16},
        {"suffix", "</ListBucketResult>"}},
       "outside the requested prefix"},
      {"list: 8 MiB of nesting", "list",
       {{"prefix", kXml}, {"body", "<a>"}, {"repeat_body_mb", 8}}, "ListObjectsV2"},
      // U+00FF U+00FE U+0000 ... sent as the raw bytes ff fe 00 (latin-1).
      {"list: binary", "list",
       {{"body", std::string("\xc3\xbf\xc3\xbe") + '\0' + "<\x01>"}, {"latin1", true}},
       "ListObjectsV2"},
      {"initiate: not XML", "initiate", {{"body", "{\"UploadId\": \"u1\"}"}},
       "CreateMultipartUpload"},
      {"initiate: no UploadId", "initiate",
       {{"body", kXml + "<InitiateMultipartUploadResult><Key>k</Key>"
                        "</InitiateMultipartUploadResult>"}},
       "no UploadId"},
      {"complete: truncated", "complete",
       {{"body", kXml + "<CompleteMultipartUploadResult><ETag>\"abc"}}, "CompleteMultipartUpload"},
      {"complete: wrong root", "complete", {{"body", kXml + "<Whatever/>"}},
       "CompleteMultipartUpload"},
      {"uploads: not XML", "uploads", {{"body", "<<<<"}}, "ListMultipartUploads"},
      {"uploads: truncated without markers", "uploads",
       {{"body", kXml + "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
                        "</ListMultipartUploadsResult>"}},
       "without markers"},
      {"uploads: the same markers forever", "uploads",
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
  rec.faults = "malformed, truncated, looping, out-of-prefix and 8-16 MiB XML answers to "
               "ListObjectsV2, Create/CompleteMultipartUpload, ListMultipartUploads";
  rec.trials = static_cast<long>(answers.size()) + 1;
  rec.faults_injected = static_cast<long>(answers.size());
  rec.committed = snap.exit_code == 0 ? 1 : 0;
  rec.detail = std::to_string(clear) + " of " + std::to_string(answers.size()) +
               " refused with exit 1 naming the operation (ls, snapshot, gc); no crash, no hang";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

}  // namespace
}  // namespace sg::testing

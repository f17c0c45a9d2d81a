// The S3 client, multipart uploads and s3:// store against a real S3 server
// (the Ceph RADOS Gateway of scripts/s3-server.sh, or SPOTGUARD_TEST_S3_*).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <random>

#include "common/crypto.h"
#include "common/files.h"
#include "common/http.h"
#include "common/s3_multipart.h"
#include "common/spare_buffer.h"
#include "tests/conformance/object_store_conformance.h"
#include "tests/support/s3_test_env.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

std::shared_ptr<ObjectStore> MakeS3Store() {
  S3TestEnv env;
  if (!LoadS3TestEnv(&env)) return nullptr;
  return std::shared_ptr<ObjectStore>(OpenTestS3Store(env, "spotguard-tests"));
}

INSTANTIATE_TEST_SUITE_P(S3, ObjectStoreConformance,
                         ::testing::Values(StoreFactory{"s3", MakeS3Store}),
                         [](const auto& info) { return info.param.name; });

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}

class S3Transfers : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(LoadS3TestEnv(&env_));
    store_ = OpenTestS3Store(env_, "");
    ASSERT_NE(store_, nullptr);
    prefix_ = "transfer-tests/" + RandomHex() + "/";
  }
  void TearDown() override {
    if (!store_) return;
    auto all = ListAll(*store_, prefix_);
    if (!all.ok()) return;
    std::vector<std::string> keys;
    for (const auto& o : *all) keys.push_back(o.key);
    for (size_t i = 0; i < keys.size(); i += 1000) {
      std::vector<std::string> batch(keys.begin() + i,
                                     keys.begin() + std::min(keys.size(), i + 1000));
      (void)client().DeleteObjects(env_.bucket, batch);
    }
  }
  S3Client& client() { return store_->client(); }
  const std::string& bucket() { return env_.bucket; }

  S3TestEnv env_;
  std::unique_ptr<S3Store> store_;
  std::string prefix_;
  TempDir dir_;
};

TEST_F(S3Transfers, A200MiBMultipartUploadWithEightPartsInFlightReadsBackIdentical) {
  const size_t size = 200u << 20;
  const std::string data = RandomBytes(size, 7);
  TransferOptions options;
  options.parts_in_flight = 8;
  const uint64_t part_size = ChoosePartSize(size, options.min_part_size);
  MultipartUpload upload(client(), bucket(), prefix_ + "big.bin", options);
  ASSERT_TRUE(upload.Start().ok());
  for (uint64_t offset = 0; offset < size; offset += part_size) {
    ASSERT_TRUE(upload.AddPart(data.substr(offset, part_size)).ok());
  }
  auto etag = upload.Complete();
  ASSERT_TRUE(etag.ok()) << etag.status().ToString();
  EXPECT_TRUE(etag->ends_with("-25")) << "8 MiB parts: 25 of them, got etag " << *etag;

  auto head = client().HeadObject(bucket(), prefix_ + "big.bin");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->size, size);
  auto back = client().GetObject(bucket(), prefix_ + "big.bin");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(Sha256Hex(*back), Sha256Hex(data));
}

// A large body given back (RecycleResponseBody) is the memory the next large
// GET on the thread is received into: every body is exactly its own bytes,
// a shorter one after a longer one included, and ranges too.
TEST_F(S3Transfers, ARecycledBodyHoldsExactlyTheNextAnswer) {
  const std::string a = RandomBytes(3u << 20, 31), b = RandomBytes((2u << 20) + 123, 32);
  ObjectStore& store = *store_;  // the interface's defaults
  ASSERT_TRUE(store.Put(prefix_ + "a", a, PutCondition::None()).ok());
  ASSERT_TRUE(store.Put(prefix_ + "b", b, PutCondition::None()).ok());
  auto first = store.Get(prefix_ + "a");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(*first, a);
  const char* memory = first->data();
  RecycleResponseBody(std::move(*first));
  auto second = store.Get(prefix_ + "b");
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(*second, b);
  EXPECT_EQ(second->data(), memory) << "received into the recycled memory";
  RecycleResponseBody(std::move(*second));
  auto range = store.Get(prefix_ + "a", ByteRange{1000, 1u << 20});
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  EXPECT_EQ(*range, a.substr(1000, 1u << 20));
  auto small = store.Get(prefix_ + "a", ByteRange{5, 100});  // below the size it recycles
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(*small, a.substr(5, 100));
}

// A writer told its object's size sizes its parts so that the object fits
// in 10,000 of them: for 120 GiB, no part goes before 13 MiB is
// appended, where a writer not told starts its upload at 8 MiB.
TEST_F(S3Transfers, AWriterToldABigSizeSendsLargerParts) {
  const std::string told_key = "told";
  const std::string plain_key = "plain";
  auto told = store_->NewWriter(prefix_ + told_key, 120ull << 30);
  auto plain = store_->NewWriter(prefix_ + plain_key);
  ASSERT_TRUE(told.ok() && plain.ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*told)->Append(RandomBytes(1u << 20, 20 + i)).ok());
    ASSERT_TRUE((*plain)->Append(RandomBytes(1u << 20, 40 + i)).ok());
  }
  auto uploads = client().ListMultipartUploads(bucket(), prefix_);
  ASSERT_TRUE(uploads.ok()) << uploads.status().ToString();
  std::vector<std::string> started;
  for (const auto& u : *uploads) started.push_back(u.key);
  EXPECT_EQ(started, std::vector<std::string>{prefix_ + plain_key}) << "10 MiB appended to each";
  (*told)->Abort();
  (*plain)->Abort();
}

TEST_F(S3Transfers, AnAbortedUploadLeavesNothingBehind) {
  const std::string key = prefix_ + "aborted";
  MultipartUpload upload(client(), bucket(), key, TransferOptions{});
  ASSERT_TRUE(upload.Start().ok());
  ASSERT_TRUE(upload.AddPart(RandomBytes(5u << 20, 1)).ok());
  ASSERT_TRUE(upload.AddPart(RandomBytes(1u << 20, 2)).ok());
  auto uploads = client().ListMultipartUploads(bucket(), key);
  ASSERT_TRUE(uploads.ok());
  EXPECT_EQ(uploads->size(), 1u);
  ASSERT_TRUE(upload.Abort().ok());
  EXPECT_EQ(upload.state(), MultipartUpload::State::kAborted);
  uploads = client().ListMultipartUploads(bucket(), key);
  ASSERT_TRUE(uploads.ok());
  EXPECT_TRUE(uploads->empty());
  EXPECT_TRUE(client().HeadObject(bucket(), key).status().Is(StatusCode::kNotFound));
  EXPECT_TRUE(
      client().ListParts(bucket(), key, upload.upload_id()).status().Is(StatusCode::kNotFound));
}

TEST_F(S3Transfers, AnUploadDroppedWithoutCompletingIsAborted) {
  const std::string key = prefix_ + "dropped";
  {
    MultipartUpload upload(client(), bucket(), key, TransferOptions{});
    ASSERT_TRUE(upload.Start().ok());
    ASSERT_TRUE(upload.AddPart(RandomBytes(5u << 20, 3)).ok());
  }
  auto uploads = client().ListMultipartUploads(bucket(), key);
  ASSERT_TRUE(uploads.ok());
  EXPECT_TRUE(uploads->empty());
}

TEST_F(S3Transfers, ListPartsShowsThePartsOfAnOpenUpload) {
  const std::string key = prefix_ + "open";
  auto id = client().CreateMultipartUpload(bucket(), key);
  ASSERT_TRUE(id.ok());
  const std::string part = RandomBytes(5u << 20, 4);
  ASSERT_TRUE(client().UploadPart(bucket(), key, *id, 1, part, BodyCheck::ContentMd5(Base64Encode(Md5(part)))).ok());
  auto parts = client().ListParts(bucket(), key, *id);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].number, 1);
  EXPECT_EQ((*parts)[0].size, part.size());
  EXPECT_EQ((*parts)[0].etag, HexEncode(Md5(part)));
  ASSERT_TRUE(client().AbortMultipartUpload(bucket(), key, *id).ok());
}

TEST_F(S3Transfers, ACorruptedPartIsRefusedByItsChecksum) {
  const std::string key = prefix_ + "bad-md5";
  auto id = client().CreateMultipartUpload(bucket(), key);
  ASSERT_TRUE(id.ok());
  const std::string part = RandomBytes(5u << 20, 5);
  auto r = client().UploadPart(bucket(), key, *id, 1, part,
                                BodyCheck::ContentMd5(Base64Encode(Md5("something else"))));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "BadDigest") << r.status().ToString();
  ASSERT_TRUE(client().AbortMultipartUpload(bucket(), key, *id).ok());
}

// Sends every request with one byte of its body flipped: bytes damaged after
// they were hashed and signed, on the way to the server.
class BodyFlippingTransport final : public HttpTransport {
 public:
  StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    HttpRequest damaged = request;
    if (!damaged.body.empty()) damaged.body[damaged.body.size() / 2] ^= 0x01;
    return inner_.Send(damaged);
  }

 private:
  CurlTransport inner_;
};

TEST_F(S3Transfers, APartOrObjectDamagedAfterItWasSignedIsRefusedByTheServer) {
  // Without Content-MD5 the server checks each body against the SHA-256 in
  // its signature (x-amz-content-sha256): a part and a large single PUT.
  BodyFlippingTransport flipping;
  StaticCredentials creds({env_.access_key, env_.secret_key, ""});
  S3ClientOptions options;
  options.endpoint = env_.endpoint;
  options.region = env_.region;
  options.retry.max_attempts = 1;
  S3Client damaging(flipping, creds, SystemClock(), options);
  const std::string key = prefix_ + "flipped";
  auto id = client().CreateMultipartUpload(bucket(), key);
  ASSERT_TRUE(id.ok());
  const std::string part = RandomBytes(5u << 20, 6);
  auto r = damaging.UploadPart(bucket(), key, *id, 1, part, BodyCheck::Signed());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().Is(StatusCode::kCorruption)) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), "XAmzContentSHA256Mismatch");
  ASSERT_TRUE(client().AbortMultipartUpload(bucket(), key, *id).ok());
  auto put = damaging.PutObject(bucket(), key, RandomBytes(3u << 20, 7));
  ASSERT_FALSE(put.ok());
  EXPECT_TRUE(put.status().Is(StatusCode::kCorruption)) << put.status().ToString();
  EXPECT_TRUE(store_->Head(key).status().Is(StatusCode::kNotFound));
}

TEST_F(S3Transfers, ListingFollowsContinuationAcrossMoreThan1000Keys) {
  constexpr int kKeys = 1100;
  BoundedExecutor executor(8, 16);
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(executor
                    .Submit([&, i] {
                      char name[32];
                      std::snprintf(name, sizeof name, "many/%05d", i);
                      return client().PutObject(bucket(), prefix_ + name, "x").status();
                    })
                    .ok());
  }
  ASSERT_TRUE(executor.Wait().ok());
  auto first = client().ListObjectsV2(bucket(), prefix_ + "many/", "");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->objects.size(), 1000u);
  EXPECT_FALSE(first->next_token.empty());
  auto all = ListAll(*store_, prefix_ + "many/");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), static_cast<size_t>(kKeys));
  for (int i = 1; i < kKeys; ++i) EXPECT_LT((*all)[i - 1].key, (*all)[i].key);
}

TEST_F(S3Transfers, AWrongSecretGivesSignatureDoesNotMatchWithoutShowingTheSecret) {
  S3TestEnv wrong = env_;
  wrong.secret_key = "NOT-THE-SECRET-7f3a9c";
  S3StoreOptions options;
  AwsSettings aws;
  aws.env = wrong.AwsEnv();
  options.aws = std::make_shared<AwsEnvironment>(aws);
  options.endpoint = wrong.endpoint;
  auto store = S3Store::Open(*ParseStoreUrl("s3://" + bucket()), options);
  ASSERT_TRUE(store.ok());
  auto r = (*store)->Put(prefix_ + "denied", "x", PutCondition::None());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().Is(StatusCode::kPermissionDenied)) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), "SignatureDoesNotMatch");
  EXPECT_NE(r.status().message().find("SignatureDoesNotMatch"), std::string::npos);
  EXPECT_EQ(r.status().ToString().find("NOT-THE-SECRET-7f3a9c"), std::string::npos);
  EXPECT_EQ(r.status().ToString().find(env_.secret_key), std::string::npos);
  EXPECT_TRUE(store_->Head(prefix_ + "denied").status().Is(StatusCode::kNotFound));
}

TEST_F(S3Transfers, DeleteObjectsRemovesABatch) {
  std::vector<std::string> keys;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(prefix_ + "batch/" + std::to_string(i) + " &<odd>");
    ASSERT_TRUE(client().PutObject(bucket(), keys.back(), "x").ok());
  }
  ASSERT_TRUE(client().DeleteObjects(bucket(), keys).ok());
  auto left = ListAll(*store_, prefix_ + "batch/");
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
}

TEST_F(S3Transfers, AMissingBucketIsNotFoundAndSaysSo) {
  auto r = client().HeadObject("spotguard-no-such-bucket-" + RandomHex(4), "k");
  EXPECT_TRUE(r.status().Is(StatusCode::kNotFound)) << r.status().ToString();
  auto list = client().ListObjectsV2("spotguard-no-such-bucket-" + RandomHex(4), "", "");
  EXPECT_EQ(list.status().reason(), "NoSuchBucket") << list.status().ToString();
}

}  // namespace
}  // namespace sg::testing

// The s3:// object store: ObjectStore on an S3 bucket and key prefix, with
// the same contracts as file:// (pinned by tests/conformance).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/aws_environment.h"
#include "common/object_store.h"
#include "common/s3_client.h"
#include "common/s3_multipart.h"
#include "common/store_url.h"

namespace sg {

// What an s3:// store takes from the config and the environment.
struct S3StoreOptions {
  // The command's AWS parts (transport, IMDS, credentials, clock, the
  // environment and the configured region), shared with its other AWS
  // clients. Required: the store never builds AWS parts of its own
  // (docs/design.md §12, one composition root).
  std::shared_ptr<AwsEnvironment> aws;
  std::optional<std::string> endpoint;  // else AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS
  bool force_path_style = false;
  int parts_in_flight = 8;  // for writers (multipart uploads)
  // How long one attempt waits for the first byte of an answer, and how long
  // a call goes on without any answer before it fails with "no answer from
  // ENDPOINT within N s"; 0: no such limit (docs/design.md §12).
  std::chrono::milliseconds answer_timeout{0};
  std::chrono::milliseconds give_up_after{0};
};

// What the S3 target is resolved from: the environment's AWS_* variables,
// and the configured region and endpoint.
struct S3TargetSettings {
  std::map<std::string, std::string> env;
  std::optional<std::string> region;    // else AWS_REGION, AWS_DEFAULT_REGION, the instance
  std::optional<std::string> endpoint;  // else AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS
};

// Region and endpoint as the AWS tools resolve them. A custom endpoint
// without any region gets "us-east-1", which S3-compatible servers accept.
struct ResolvedS3Target {
  std::string region;
  std::string endpoint;  // "" for AWS
};
StatusOr<ResolvedS3Target> ResolveS3Target(const S3TargetSettings& settings, MetadataService* imds);

class S3Store final : public ObjectStore {
 public:
  static StatusOr<std::unique_ptr<S3Store>> Open(const StoreUrl& url,
                                                 const S3StoreOptions& options);

  StatusOr<std::string> Put(const std::string& key, std::string_view data,
                            const PutCondition& condition) override;
  StatusOr<std::string> Get(const std::string& key, std::optional<ByteRange> range,
                            ObjectInfo* info) override;
  Status GetTo(const std::string& key, ByteRange range, const BodySink& sink) override;
  StatusOr<ObjectInfo> Head(const std::string& key) override;
  StatusOr<ListPage> List(const std::string& prefix, const std::string& token,
                          int max_keys) override;
  Status Delete(const std::string& key) override;
  StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& key,
                                                    uint64_t size_hint = 0) override;
  StatusOr<int> CleanStaleWrites(const std::string& prefix, std::chrono::seconds age,
                                 const KeyFilter& spare) override;
  std::string Describe() const override;

  S3Client& client() { return *client_; }
  // How the server checks a writer's parts and single PUT (Open).
  const BodyCheck& writer_check() const;
  const std::string& bucket() const { return bucket_; }
  // The bucket key for a store key.
  std::string FullKey(const std::string& key) const;
  // The inverse: a bucket key under the prefix as this store's key.
  std::string StoreKeyOf(const std::string& full_key) const;

  ~S3Store() override;

 private:
  struct Parts;
  class Writer;
  S3Store(std::unique_ptr<Parts> parts, std::string bucket, std::string prefix);

  std::unique_ptr<Parts> parts_;  // the AWS environment and the client
  S3Client* client_;
  const std::string bucket_;
  const std::string prefix_;  // "" or "a/b"
};

}  // namespace sg

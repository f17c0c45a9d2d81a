#include "common/s3_store.h"

#include <algorithm>

#include "common/spare_buffer.h"
#include "common/strings.h"

namespace sg {

StatusOr<ResolvedS3Target> ResolveS3Target(const S3TargetSettings& o, MetadataService* imds) {
  ResolvedS3Target t;
  t.endpoint = o.endpoint.value_or("");
  for (const char* name : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    if (t.endpoint.empty()) t.endpoint = EnvOr(o.env, name);
  }
  while (!t.endpoint.empty() && t.endpoint.back() == '/') t.endpoint.pop_back();
  if (!t.endpoint.empty() && !t.endpoint.starts_with("http://") &&
      !t.endpoint.starts_with("https://")) {
    return Status::InvalidArgument("S3 endpoint \"" + t.endpoint + "\" must start with http(s)://");
  }
  t.region = ConfiguredRegion(o.region, o.env);
  if (t.region.empty() && !t.endpoint.empty()) t.region = "us-east-1";
  if (t.region.empty()) t.region = InstanceRegion(imds, o.env);
  if (t.region.empty()) {
    return Status::InvalidArgument(
        "no AWS region: set \"region\" in the config, AWS_REGION, or run on EC2");
  }
  return t;
}

struct S3Store::Parts {
  TransferOptions transfer;
  std::shared_ptr<AwsEnvironment> aws;
  std::unique_ptr<S3Client> client;
};

S3Store::S3Store(std::unique_ptr<Parts> parts, std::string bucket, std::string prefix)
    : parts_(std::move(parts)),
      client_(parts_->client.get()),
      bucket_(std::move(bucket)),
      prefix_(std::move(prefix)) {}

S3Store::~S3Store() = default;

StatusOr<std::unique_ptr<S3Store>> S3Store::Open(const StoreUrl& url,
                                                 const S3StoreOptions& options) {
  if (url.scheme != StoreUrl::Scheme::kS3) return Status::InvalidArgument("not an s3:// URL");
  auto parts = std::make_unique<Parts>();
  parts->transfer.parts_in_flight = options.parts_in_flight;
  if (!options.aws) return Status::InvalidArgument("an s3:// store needs the command's AWS parts");
  parts->aws = options.aws;
  // Region and environment are the AWS environment's.
  const S3TargetSettings settings{parts->aws->env(), parts->aws->settings().region,
                                  options.endpoint};
  SG_ASSIGN_OR_RETURN(ResolvedS3Target target, ResolveS3Target(settings, parts->aws->imds()));
  S3ClientOptions client_options;
  client_options.region = target.region;
  client_options.endpoint = target.endpoint;
  client_options.force_path_style = options.force_path_style;
  client_options.answer_timeout = options.answer_timeout;
  client_options.give_up_after = options.give_up_after;
  // A writer's bytes (snapshot frames, with their own digests) go unsigned
  // where the transport keeps them intact: the part's SHA-256 would be a
  // third hash of every stored byte (docs/design.md §4, "What an upload
  // hashes"). Over plain http to another host the server still checks them.
  parts->transfer.part_check = TransportKeepsBodiesIntact(target.endpoint)
                                   ? BodyCheck::Unsigned()
                                   : BodyCheck::Signed();
  parts->client = std::make_unique<S3Client>(parts->aws->transport(), parts->aws->credentials(),
                                             parts->aws->clock(), client_options);
  return std::unique_ptr<S3Store>(new S3Store(std::move(parts), url.bucket, url.prefix));
}

const BodyCheck& S3Store::writer_check() const { return parts_->transfer.part_check; }

std::string S3Store::FullKey(const std::string& key) const {
  return prefix_.empty() ? key : prefix_ + "/" + key;
}

std::string S3Store::StoreKeyOf(const std::string& full_key) const {
  const size_t strip = prefix_.empty() ? 0 : prefix_.size() + 1;
  return full_key.substr(std::min(strip, full_key.size()));
}

std::string S3Store::Describe() const {
  return "s3://" + bucket_ + (prefix_.empty() ? "" : "/" + prefix_);
}

StatusOr<std::string> S3Store::Put(const std::string& key, std::string_view data,
                                   const PutCondition& condition) {
  if (data.size() > (5ull << 30)) {
    return Status::InvalidArgument("Put of " + key +
                                   ": objects over 5 GiB need a multipart upload");
  }
  // No Content-MD5: the body goes with a signed SHA-256 that the server checks.
  // A large body (a pack) is taken from the shared pool, which it goes back
  // to once sent (common/spare_buffer.h): the next pack reuses it.
  std::string body = TakeSharedBuffer(data.size());
  body.assign(data);
  SG_ASSIGN_OR_RETURN(S3PutResult r,
                      client_->PutObject(bucket_, FullKey(key), std::move(body), condition));
  if (r.etag.empty()) {
    SG_ASSIGN_OR_RETURN(ObjectInfo head, client_->HeadObject(bucket_, FullKey(key)));
    return head.etag;
  }
  return r.etag;
}

StatusOr<std::string> S3Store::Get(const std::string& key, std::optional<ByteRange> range,
                                   ObjectInfo* info) {
  auto data = client_->GetObject(bucket_, FullKey(key), range, info);
  if (info && data.ok()) info->key = key;
  return data;
}

Status S3Store::GetTo(const std::string& key, ByteRange range, const BodySink& sink) {
  return client_->GetObjectTo(bucket_, FullKey(key), range, sink);
}

StatusOr<ObjectInfo> S3Store::Head(const std::string& key) {
  SG_ASSIGN_OR_RETURN(ObjectInfo info, client_->HeadObject(bucket_, FullKey(key)));
  info.key = key;
  return info;
}

StatusOr<ListPage> S3Store::List(const std::string& prefix, const std::string& token,
                                 int max_keys) {
  SG_ASSIGN_OR_RETURN(ListPage page, client_->ListObjectsV2(bucket_, FullKey(prefix), token,
                                                            std::min(max_keys, 1000)));
  for (ObjectInfo& o : page.objects) o.key = StoreKeyOf(o.key);
  return page;
}

Status S3Store::Delete(const std::string& key) {
  return client_->DeleteObject(bucket_, FullKey(key));
}

// Buffers appends into parts of at least `part_size` bytes; an object that
// never fills one part goes up as a single PUT at Commit.
class S3Store::Writer final : public ObjectWriter {
 public:
  Writer(S3Store& store, std::string key, uint64_t part_size)
      : store_(store), key_(std::move(key)), part_size_(part_size) {}
  ~Writer() override { Abort(); }

  Status Append(std::string data) override {
    if (closed_) return Status::InvalidArgument("writer for " + key_ + " is closed");
    const uint64_t part_size = part_size_;
    if (buffer_.empty() && data.size() >= part_size) {
      buffer_ = std::move(data);  // a whole part already: no copy
    } else {
      // Room for a full part plus the append that completes it: the part is
      // filled with one copy of each append and never regrown. Parts and
      // appends come from and go back to the shared pool (the sent part:
      // SignedCallExecutor), so a long upload maps no new memory.
      if (buffer_.capacity() < part_size) {
        buffer_ = TakeSharedBuffer(std::max(part_size + data.size(), 2 * part_size + (1 << 20)));
        buffer_.clear();
      }
      buffer_ += data;
      GiveSharedBuffer(std::move(data));
    }
    if (buffer_.size() < part_size) return Status::Ok();
    if (!upload_) {
      upload_ = std::make_unique<MultipartUpload>(*store_.client_, store_.bucket_, key_,
                                                  store_.parts_->transfer);
      SG_RETURN_IF_ERROR(upload_->Start());
    }
    std::string part;
    part.swap(buffer_);
    return upload_->AddPart(std::move(part));
  }

  StatusOr<std::string> Commit() override {
    if (closed_) return Status::InvalidArgument("writer for " + key_ + " is closed");
    closed_ = true;
    if (!upload_) {
      SG_ASSIGN_OR_RETURN(S3PutResult r,
                          store_.client_->PutObject(store_.bucket_, key_, std::move(buffer_), {},
                                                    store_.parts_->transfer.part_check));
      return r.etag;
    }
    if (!buffer_.empty()) SG_RETURN_IF_ERROR(upload_->AddPart(std::move(buffer_)));
    return upload_->Complete();
  }

  void Abort() override {
    closed_ = true;
    if (upload_) (void)upload_->Abort();
    buffer_.clear();
  }

 private:
  S3Store& store_;
  const std::string key_;
  const uint64_t part_size_;
  std::string buffer_;
  std::unique_ptr<MultipartUpload> upload_;
  bool closed_ = false;
};

StatusOr<std::unique_ptr<ObjectWriter>> S3Store::NewWriter(const std::string& key,
                                                            uint64_t size_hint) {
  return std::unique_ptr<ObjectWriter>(
      new Writer(*this, FullKey(key), WriterPartSize(parts_->transfer.min_part_size, size_hint)));
}
StatusOr<int> S3Store::CleanStaleWrites(const std::string& prefix, std::chrono::seconds age,
                                        const KeyFilter& spare) {
  SG_ASSIGN_OR_RETURN(std::vector<MultipartUploadInfo> uploads,
                      client_->ListMultipartUploads(bucket_, FullKey(prefix)));
  const auto cutoff = parts_->aws->clock().Now() - age;
  int aborted = 0;
  for (const MultipartUploadInfo& u : uploads) {
    auto initiated = ParseIso8601(u.initiated);
    if (!initiated.ok() || *initiated >= cutoff) continue;
    if (spare && spare(StoreKeyOf(u.key))) continue;
    SG_RETURN_IF_ERROR(client_->AbortMultipartUpload(bucket_, u.key, u.upload_id));
    ++aborted;
  }
  return aborted;
}

}  // namespace sg

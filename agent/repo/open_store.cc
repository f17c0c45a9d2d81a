// The store parts of a command or an agent (agent/repo/open_store.h).
#include "agent/repo/open_store.h"

#include <algorithm>

#include "agent/config/exit_codes.h"
#include "common/s3_store.h"
#include "common/store_url.h"

namespace sg {
namespace {

ShufflePolicy PolicyOf(Shuffle s) {
  switch (s) {
    case Shuffle::kAuto:
      return ShufflePolicy::kAuto;
    case Shuffle::kOff:
      return ShufflePolicy::kOff;
    case Shuffle::kTwo:
      return ShufflePolicy::kTwo;
    case Shuffle::kFour:
      return ShufflePolicy::kFour;
  }
  return ShufflePolicy::kAuto;
}

}  // namespace

SnapshotOptions SnapshotOptionsOf(const Config& config) {
  SnapshotOptions options;
  options.level = config.compression.level;
  options.threads = config.compression.threads;
  options.shuffle = PolicyOf(config.compression.shuffle);
  options.reuse = config.reuse;
  return options;
}

std::shared_ptr<AwsEnvironment> OpenAws(const Config& config, const Environment& env) {
  return std::make_shared<AwsEnvironment>(
      AwsSettings{.env = env, .region = config.region, .imds_endpoint = config.imds.endpoint});
}

StatusOr<std::unique_ptr<ObjectStore>> OpenStore(const Config& config, const Environment& env,
                                                 std::shared_ptr<AwsEnvironment> aws, StoreUse use,
                                                 StoreAccess access) {
  SG_ASSIGN_OR_RETURN(StoreUrl url, ParseStoreUrl(config.store));
  S3StoreOptions options;
  using std::chrono::seconds;
  if (use == StoreUse::kInteractive) {
    options.answer_timeout = seconds(10);
    options.give_up_after = seconds(15);
  } else if (use == StoreUse::kTransfer) {
    options.answer_timeout = seconds(30);
    options.give_up_after = seconds(60);
  } else if (use == StoreUse::kLease) {
    using std::chrono::milliseconds;
    const auto heartbeat = std::chrono::duration_cast<milliseconds>(config.lease.heartbeat);
    // Floors, so that a loaded machine's slow answer is not cut off when
    // the heartbeat is short (as in tests).
    options.answer_timeout =
        std::max<milliseconds>(seconds(2), std::min<milliseconds>(seconds(10), heartbeat / 2));
    options.give_up_after = std::max<milliseconds>(seconds(2), heartbeat);
  } else {
    options.answer_timeout = seconds(30);
  }
  // Built only for an s3:// store: a file:// store needs no AWS parts.
  if (url.scheme == StoreUrl::Scheme::kS3) {
    options.aws = aws ? std::move(aws) : OpenAws(config, env);
  }
  options.endpoint = config.endpoint;
  return OpenObjectStore(
      url, options, access == StoreAccess::kReadOnly ? FileRoot::kMustExist : FileRoot::kCreate);
}

int StoreOpenExitCode(const Status& st) {
  return st.Is(StatusCode::kNotFound) ? kExitUsage : kExitFailure;
}

}  // namespace sg

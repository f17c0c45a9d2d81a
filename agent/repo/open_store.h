// Composition of a command's or an agent's store parts from its config
// (docs/design.md §12): the AWS parts, the object store with the timeouts
// its use calls for, and the snapshot writer's settings.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "agent/config/config.h"
#include "agent/repo/snapshot_writer.h"
#include "common/aws_environment.h"
#include "common/object_store.h"

namespace sg {

using Environment = std::map<std::string, std::string>;

// The command's AWS parts (transport, IMDS client, credentials chain, region),
// from the config's region and imds.endpoint and the environment. Built once
// per command and shared by its store and its other AWS clients.
std::shared_ptr<AwsEnvironment> OpenAws(const Config& config, const Environment& env);

// What a command does with its store, which sets how long an s3:// store
// waits for answers (docs/design.md §12; docs/s3.md, "Timeouts"):
// - kAgent: `run` and `drill`: an attempt waits 30 s for the first byte of
//   an answer; a call is bounded by the retry policy and the stall timeout,
//   and the agent's own deadlines cancel what outlives them.
// - kLease: the agent's lease reads and writes: an attempt waits at most
//   min(10 s, lease.heartbeat / 2) for the first byte, and a call gives up
//   after one lease.heartbeat (2 s at least, for both), so a hung renewal is
//   tried again at the next heartbeat, long before the lease times out.
// - kInteractive: ls, status, verify, gc, doctor: an attempt waits 10 s for
//   the first byte of an answer, and a call with no answer for 15 s fails
//   with "no answer from ENDPOINT within 15 s".
// - kTransfer: snapshot and restore: 30 s per attempt, 60 s per call; bodies
//   are bounded by the stall timeout only, never by a total.
enum class StoreUse { kAgent, kLease, kInteractive, kTransfer };

// The store the config names (s3:// or file://), with region, endpoint and
// credentials from the config and the environment; an s3:// store uses `aws`
// (null: its own, from OpenAws).
// kReadOnly (ls, verify, status, logs, restore): a file:// store is never
// created; a missing root is NotFound, naming the path (StoreOpenExitCode).
enum class StoreAccess { kReadWrite, kReadOnly };
StatusOr<std::unique_ptr<ObjectStore>> OpenStore(const Config& config, const Environment& env,
                                                 std::shared_ptr<AwsEnvironment> aws = nullptr,
                                                 StoreUse use = StoreUse::kAgent,
                                                 StoreAccess access = StoreAccess::kReadWrite);
// The exit code of a command whose store could not be opened: 2 (a config
// error) when a read-only command's file:// store does not exist, else 1.
int StoreOpenExitCode(const Status& st);

// Compression settings of the config, as the snapshot writer takes them.
SnapshotOptions SnapshotOptionsOf(const Config& config);

}  // namespace sg

// The executor of the round protocol (docs/design.md §14): setup, this
// member's record and the lease. Its decisions are agent/repo/group_protocol.h's
// pure functions; its store calls run off the loop (group_agent_impl.h).
#include "agent/group/group_agent.h"

#include "agent/group/group_agent_impl.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include "agent/detect/capture.h"
#include "agent/run/attempt_record.h"
#include "agent/ledger/events.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/group_protocol.h"
#include "agent/repo/group_store.h"
#include "agent/run/job_end.h"
#include "agent/run/job_ports_real.h"
#include "agent/run/job_start.h"
#include "agent/repo/lease.h"
#include "agent/detect/presets.h"
#include "agent/repo/restorer.h"
#include "agent/repo/open_store.h"
#include "agent/repo/snapshot_writer.h"
#include "agent/repo/store_names.h"
#include "agent/trainer/supervisor.h"
#include "agent/trainer/trainer_record.h"
#include "common/autoscaling_client.h"
#include "common/files.h"
#include "common/log.h"
#include "common/orphan_reaper.h"
#include "common/signal_names.h"

namespace sg::group_detail {

namespace {

std::string RandomHex(int bytes) {
  std::random_device rd;
  std::string out;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < bytes; ++i) {
    const unsigned v = rd() & 0xff;
    out += kHex[v >> 4];
    out += kHex[v & 15];
  }
  return out;
}

// How peers reach this node: group.address, else the metadata service's
// local-ipv4, else the host's first non-loopback IPv4 address.
std::string OwnAddress(const Config& cfg, MetadataService* imds) {
  if (cfg.group.address) return *cfg.group.address;
  if (imds) {
    if (auto ip = imds->Get("meta-data/local-ipv4"); ip.ok() && !ip->empty()) return *ip;
  }
  ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
      char host[NI_MAXHOST];
      if (::getnameinfo(a->ifa_addr, sizeof(sockaddr_in), host, sizeof host, nullptr, 0,
                        NI_NUMERICHOST) != 0) {
        continue;
      }
      if (std::string(host).starts_with("127.")) continue;
      found = host;
      break;
    }
    ::freeifaddrs(list);
  }
  return found;
}

}  // namespace

Status GroupAgent::Setup() {
  if (std::optional<NodeShell::Failure> failed = shell_.Begin(events_)) {
    exit_code_ = failed->exit_code;
    return failed->status;
  }
  SG_RETURN_IF_ERROR(
      CheckWritableDir(cfg_.checkpoint_dir, "checkpoint_dir " + cfg_.checkpoint_dir));
  // A fresh disk has no checkpoint dir yet: made here, as one node's agent
  // makes it before its restore.
  SG_RETURN_IF_ERROR(MakeDirs(cfg_.checkpoint_dir));
  SG_ASSIGN_OR_RETURN(LoopParts parts, PrepareLoopParts(c_));
  staging_root_ = std::move(parts.staging_root);
  own_checkpoints_ = std::move(parts.own_checkpoints);
  checkpoints_ = parts.checkpoints;
  logs_.Open(c_.env);
  launcher_.set_output(logs_.TrainerSink());
  self_ = OwnRecord(cfg_, c_.instance, c_.instance + "-" + RandomHex(4),
                    OwnAddress(cfg_, c_.imds));
  LogInfo("member {} of job {} ({} nodes), reachable at {}", self_.agent, cfg_.job, cfg_.nodes,
          self_.address);
  policy_.emplace(GroupPolicyOptions::FromConfig(cfg_, c_.instance), self_);
  return Status::Ok();
}

void GroupAgent::Write(std::function<Status()> call, std::string what) {
  calls_.Post<Status>(std::move(call),
                      [what = std::move(what)](Status& st) { Noted(st, what); });
}

void GroupAgent::Beat(Clock::MonoTime now) {
  // A node on its way out is no member of the next round.
  if (node_.leaving() || beat_busy_ || now < next_beat_) return;
  next_beat_ = now + cfg_.group.heartbeat;
  ++self_.beat;
  beat_busy_ = true;
  calls_.Post<Status>([this, record = self_] { return group_.WriteMember(record); },
                      [this](Status& st) {
                        beat_busy_ = false;
                        if (!st.ok()) {
                          LogWarn("writing this member's record failed (will retry): {}",
                                  st.message());
                        }
                      });
}

void GroupAgent::KeepLease(Clock::MonoTime now) {
  // Whether to try is known once the members and the newest plan were read.
  if (lease_busy_ || now < next_lease_ || (!coordinating_ && !policy_->plan_read())) return;
  next_lease_ = now + std::min<Duration>(cfg_.lease.heartbeat, cfg_.group.heartbeat);
  if (!coordinating_) {
    // Only a member that is not on its way out coordinates.
    if (node_.leaving() || exit_code_) return;
    // A newcomer leaves it to the last round's members while one is alive.
    if (phase() == JobPhase::kLease && !policy_->MayCoordinate(now)) return;
  }
  lease_busy_ = true;
  calls_.Post<LeaseState>(
      [this] {
        LeaseState out;
        if (lease_.held()) {
          if (lease_.RenewalDue()) out.status = lease_.Renew();
        } else if (auto attempt = lease_.TryAcquire(); !attempt.ok()) {
          out.status = attempt.status();
        } else {
          out.acquired = attempt->outcome == LeaseKeeper::Outcome::kAcquired;
        }
        out.held = lease_.held();
        out.generation = lease_.generation();
        return out;
      },
      [this](LeaseState& lease) {
        lease_busy_ = false;
        TakeLease(lease);
      });
}

void GroupAgent::TakeLease(const LeaseState& lease) {
  if (lease.acquired) {
    LogInfo("coordinating job {} (lease generation {})", cfg_.job, lease.generation);
  } else if (lease.status.reason() == "Fenced") {
    LogWarn("no longer the coordinator: {}", lease.status.message());
  } else if (!lease.status.ok() && coordinating_) {
    LogWarn("renewing the lease failed (will retry): {}", lease.status.message());
  }
  coordinating_ = lease.held;
  generation_ = lease.generation;
}

void GroupAgent::JobComplete() {
  LogInfo("job {} is complete", cfg_.job);
  // Every node releases its own instance (shutdown) or the group
  // (scale-to-zero, which is idempotent), as a single node does: at the
  // exit, once the store calls before it are done (End).
  complete_ = true;
  Exit(kExitOk);
}

void GroupAgent::Exit(int code) {
  SayStopping();
  exit_code_ = code;
}

}  // namespace sg::group_detail

#include "agent/repo/lease.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "agent/repo/store_layout.h"
#include "common/log.h"
#include "common/proc_stat.h"

namespace sg {

LeaseKeeper::LeaseKeeper(ObjectStore& store, Clock& clock, std::string job, std::string instance,
                         LeaseOptions options)
    : store_(store),
      clock_(clock),
      job_(std::move(job)),
      instance_(std::move(instance)),
      key_(LeaseKey(job_)),
      options_(options) {}

AgentIdentity ThisAgent() {
  AgentIdentity me;
  me.pid = ::getpid();
  if (auto st = ReadProcStat(::getpid()); st.ok()) me.start_ticks = st->start_ticks;
  me.boot_id = BootId();
  return me;
}

bool AgentProcessAlive(const AgentIdentity& agent) {
  const std::string boot = BootId();
  if (!agent.boot_id.empty() && !boot.empty() && agent.boot_id != boot) return false;
  if (agent.pid <= 0) return false;
  auto st = ReadProcStat(static_cast<pid_t>(agent.pid));
  if (!st.ok()) return false;  // no such process
  return st->state != 'Z' && st->start_ticks == agent.start_ticks;
}

StatusOr<LeaseState> LeaseKeeper::Parse(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("generation") || !j["generation"].is_number_unsigned()) {
    return Status::Corruption("the lease object is not a spotguard lease");
  }
  LeaseState s;
  s.generation = j["generation"].get<uint64_t>();
  s.instance = j.value("instance", "");
  s.heartbeat = j.value("heartbeat", "");
  s.released = j.value("released", false);
  if (auto a = j.find("agent"); a != j.end() && a->is_object()) {
    const auto& o = *a;
    if (o.contains("pid") && o["pid"].is_number_integer() && o.contains("start_ticks") &&
        o["start_ticks"].is_number_unsigned()) {
      AgentIdentity id;
      id.pid = o["pid"].get<int64_t>();
      id.start_ticks = o["start_ticks"].get<uint64_t>();
      if (o.contains("boot_id") && o["boot_id"].is_string()) id.boot_id = o["boot_id"];
      s.agent = id;
    }
  }
  return s;
}

std::string LeaseKeeper::Body(uint64_t generation, bool released) const {
  nlohmann::ordered_json j = {{"generation", generation},
                              {"instance", instance_},
                              {"heartbeat", FormatUtc(clock_.Now(), true)},
                              {"released", released},
                              {"agent",
                               {{"pid", options_.agent.pid},
                                {"start_ticks", options_.agent.start_ticks},
                                {"boot_id", options_.agent.boot_id}}}};
  return j.dump();
}

StatusOr<LeaseKeeper::Attempt> LeaseKeeper::Take(const std::string& condition_etag, bool create,
                                                 const LeaseState& from) {
  const uint64_t generation = from.generation + 1;
  auto put =
      store_.Put(key_, Body(generation, false),
                 create ? PutCondition::CreateOnly() : PutCondition::IfMatch(condition_etag));
  if (!put.ok()) {
    if (put.status().Is(StatusCode::kPreconditionFailed)) {
      // Someone else took it first; report what is there now.
      Attempt a{Outcome::kHeldByOther, from, {}};
      return a;
    }
    return put.status();
  }
  etag_ = *put;
  generation_ = generation;
  last_write_ = clock_.Monotonic();
  LogInfo("took the lease of job {} (generation {}{})", job_, generation,
          create ? "" : ", after " + (from.instance.empty() ? std::string("?") : from.instance));
  return Attempt{
      Outcome::kAcquired, LeaseState{generation, instance_, "", false, options_.agent}, {}};
}

StatusOr<LeaseKeeper::Attempt> LeaseKeeper::TryAcquire() {
  if (held()) {
    SG_RETURN_IF_ERROR(Renew());
    return Attempt{
        Outcome::kAcquired, LeaseState{generation_, instance_, "", false, options_.agent}, {}};
  }
  ObjectInfo info;
  auto body = store_.Get(key_, std::nullopt, &info);
  if (!body.ok()) {
    if (!body.status().Is(StatusCode::kNotFound)) return body.status();
    return Take("", /*create=*/true, LeaseState{});
  }
  auto state = Parse(*body);
  if (!state.ok()) {
    // A damaged lease object is taken over like a released one.
    LogWarn("the lease of job {} is unreadable ({}); taking it over", job_,
            state.status().message());
    return Take(info.etag, false, LeaseState{});
  }
  if (state->released) return Take(info.etag, false, *state);
  if (state->instance == instance_ && state->agent) {
    // An agent restarted in place may take its instance's lease back at once,
    // but only when the agent that wrote it is certainly gone: a second live
    // agent of the same instance (or this one's own write whose answer was
    // lost) must not be fenced by a newcomer. docs/agent.md, "Fencing".
    if (*state->agent == options_.agent || !options_.agent_alive(*state->agent)) {
      return Take(info.etag, false, *state);
    }
  }
  const auto now = clock_.Monotonic();
  if (info.etag != observed_etag_) {
    observed_etag_ = info.etag;
    observed_since_ = now;
  }
  const auto unchanged =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - observed_since_);
  if (unchanged >= options_.timeout) {
    LogWarn("the lease of job {} held by {} has not been renewed for {}s; taking over", job_,
            state->instance, unchanged.count() / 1000);
    return Take(info.etag, false, *state);
  }
  return Attempt{Outcome::kHeldByOther, *state, unchanged};
}

Status LeaseKeeper::Renew() {
  if (!held()) return Status::PreconditionFailed("the lease is not held").WithReason("Fenced");
  auto put = store_.Put(key_, Body(generation_, false), PutCondition::IfMatch(etag_));
  if (!put.ok() && put.status().Is(StatusCode::kPreconditionFailed) && AdoptOwnWrite()) {
    // An earlier renewal landed although its answer was lost: the object
    // changed under our etag, but only by us. Renew again from what is there.
    put = store_.Put(key_, Body(generation_, false), PutCondition::IfMatch(etag_));
  }
  if (!put.ok()) {
    if (put.status().Is(StatusCode::kPreconditionFailed)) {
      etag_.clear();
      return Status::PreconditionFailed("lost the lease of job " + job_ +
                                        ": another instance has taken over")
          .WithReason("Fenced");
    }
    return put.status();
  }
  etag_ = *put;
  last_write_ = clock_.Monotonic();
  return Status::Ok();
}

// Every takeover writes a higher generation (Take), so a lease object with
// our generation, instance and agent that is not released can only be one of
// our own renewals whose answer did not reach us (a first-byte timeout, a
// reset after the server applied it).
bool LeaseKeeper::AdoptOwnWrite() {
  ObjectInfo info;
  auto body = store_.Get(key_, std::nullopt, &info);
  if (!body.ok()) return false;
  auto state = Parse(*body);
  if (!state.ok() || state->released || state->generation != generation_ ||
      state->instance != instance_ || !state->agent || !(*state->agent == options_.agent)) {
    return false;
  }
  LogInfo("the lease of job {} holds a renewal of ours whose answer was lost; renewing from it",
          job_);
  etag_ = info.etag;
  return true;
}

Status LeaseKeeper::Release() {
  if (!held()) return Status::Ok();
  auto put = store_.Put(key_, Body(generation_, true), PutCondition::IfMatch(etag_));
  etag_.clear();
  if (!put.ok() && !put.status().Is(StatusCode::kPreconditionFailed)) return put.status();
  return Status::Ok();
}

bool LeaseKeeper::RenewalDue() {
  return held() && clock_.Monotonic() - last_write_ >= options_.heartbeat;
}

}  // namespace sg

// Fencing (docs/design.md §6): one instance trains a job at a time. The lease is the
// object <job>/lease, {"generation", "instance", "heartbeat", "released"},
// taken and renewed only with conditional writes:
//  - absent           -> create-only write, generation 1;
//  - held by us       -> If-Match on our last etag (a renewal);
//  - released         -> If-Match on its etag, generation + 1;
//  - written by our instance, by an agent process that is provably gone from
//    this host (its "agent" pid and start time name no live process)
//                     -> If-Match on its etag at once, generation + 1;
//  - held by another  -> wait; it is stale once its etag has not changed for
//                        `timeout` of OUR monotonic clock (no trust in other
//                        clocks), then If-Match on that etag, generation + 1.
//                        This includes another live agent of our own
//                        instance, and a lease without "agent" (written by
//                        spotguard before 0.1.1): nothing proves its writer gone.
// Of several takers only one If-Match can win. A holder whose renewal fails
// with PreconditionFailed has been fenced and must commit nothing more.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/object_store.h"

namespace sg {

// The agent process that wrote a lease, as "agent" in its body. pid and
// start time (in the agent's pid namespace) name one process incarnation;
// the boot id tells a pid of an earlier boot from a live one.
struct AgentIdentity {
  int64_t pid = 0;
  uint64_t start_ticks = 0;
  std::string boot_id;
  bool operator==(const AgentIdentity&) const = default;
};

// This process.
AgentIdentity ThisAgent();
// Whether the process `agent` names still runs on this host. False only when
// that is certain: another boot, no such pid, a zombie, another start time.
bool AgentProcessAlive(const AgentIdentity& agent);

struct LeaseOptions {
  std::chrono::milliseconds heartbeat{30'000};
  std::chrono::milliseconds timeout{150'000};
  // Written into the lease; tests give fake ones.
  AgentIdentity agent = ThisAgent();
  // Asked about a lease written by our own instance; tests give fakes.
  std::function<bool(const AgentIdentity&)> agent_alive = AgentProcessAlive;
};

struct LeaseState {
  uint64_t generation = 0;
  std::string instance;
  std::string heartbeat;  // UTC, as the holder wrote it
  bool released = false;
  std::optional<AgentIdentity> agent;  // absent in leases written before 0.1.1
};

class LeaseKeeper {
 public:
  LeaseKeeper(ObjectStore& store, Clock& clock, std::string job, std::string instance,
              LeaseOptions options);

  enum class Outcome { kAcquired, kHeldByOther };
  struct Attempt {
    Outcome outcome;
    LeaseState current;  // the lease as it is now
    std::chrono::milliseconds unchanged_for{
        0};  // how long we have seen the other's lease unchanged
  };
  // One try to take the lease; call again (e.g. every heartbeat) while it is
  // held by another. Errors are the store's.
  StatusOr<Attempt> TryAcquire();
  // REQUIRES: held(). Renews with If-Match. PreconditionFailed (reason
  // "Fenced") when another instance has taken over; held() is false then.
  // A renewal of ours that landed although its answer was lost (the lease's
  // calls have short deadlines) is recognised and renewed from, not taken
  // for a takeover.
  Status Renew();
  // REQUIRES: held(). Marks the lease released so a successor need not wait.
  Status Release();

  bool held() const { return !etag_.empty(); }
  uint64_t generation() const { return generation_; }
  // Whether a renewal is due (heartbeat elapsed since the last write).
  bool RenewalDue();

  static StatusOr<LeaseState> Parse(const std::string& body);

 private:
  std::string Body(uint64_t generation, bool released) const;
  bool AdoptOwnWrite();
  StatusOr<Attempt> Take(const std::string& condition_etag, bool create, const LeaseState& from);

  ObjectStore& store_;
  Clock& clock_;
  const std::string job_, instance_, key_;
  const LeaseOptions options_;
  std::string etag_;  // of our own last write; empty when not held
  uint64_t generation_ = 0;
  Clock::MonoTime last_write_{};
  // The other holder's lease as we last saw it, and since when.
  std::string observed_etag_;
  Clock::MonoTime observed_since_{};
};

}  // namespace sg

// A snapshot writer's claim on its seq, kept alive while it writes
// (docs/design.md §4, "Live writers"). The collector counts a writer live
// while its claim object is younger than kClaimTtl, whatever
// `gc --older-than` says; the keeper renews the claim well within that, and
// tells the writer before its commit whether the claim was ever broken.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/object_store.h"

namespace sg {

// How long a claim counts as live after its last write (the collector's
// rule, agent/repo/retention.cc).
inline constexpr std::chrono::seconds kClaimTtl{600};

struct ClaimTiming {
  // How often the keeper's thread renews the claim.
  std::chrono::milliseconds renew_every{60'000};
  // The longest stretch the writer accepts between two renewals the store
  // took (from the first one's sending to the second's answer): half the
  // collector's TTL, so that a gc whose clock runs up to that much ahead of
  // the store's still sees the claim live (docs/design.md §4).
  std::chrono::seconds longest_gap{kClaimTtl / 2};
};

class ClaimKeeper {
 public:
  // `etag` is the claim's, from its create-only write sent at `sent`;
  // `body` is its content, to which each renewal adds `renewed`; its
  // `writer` token, unique to this writer, tells a renewal of ours whose
  // answer was lost from another's claim.
  ClaimKeeper(ObjectStore& store, Clock& clock, std::string key, nlohmann::ordered_json body,
              std::string etag, Clock::MonoTime sent, ClaimTiming timing = {});
  ~ClaimKeeper();
  ClaimKeeper(const ClaimKeeper&) = delete;
  ClaimKeeper& operator=(const ClaimKeeper&) = delete;

  // Starts the thread that renews every `renew_every`; Stop (or the
  // destructor) ends it.
  void Start();
  void Stop();

  // Renews the claim once more (If-Match on the last ETag: a claim that gc
  // deleted is never written again) and says whether it was held without a
  // break since it was taken: Aborted, naming why, when a renewal found it
  // gone or replaced, or when two renewals the store took were further
  // apart than `longest_gap` (Unavailable: the next snapshot claims afresh).
  // The writer commits only after an Ok.
  Status CheckHeld();

  int renewals() const;

 private:
  // One conditional renewal; records a break. False when the store did not
  // take it. Holds mu_.
  bool RenewLocked();
  // A renewal of ours whose answer was lost is what the store holds: takes
  // its ETag (the body's `writer` token is ours). Holds mu_.
  bool AdoptOwnWriteLocked();

  ObjectStore& store_;
  Clock& clock_;
  const std::string key_;
  const nlohmann::ordered_json body_;
  const ClaimTiming timing_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::string etag_;
  Clock::MonoTime last_sent_;          // of the newest renewal the store took
  std::optional<std::string> broken_;  // why the claim was lost, once it was
  int renewals_ = 0;
  std::thread thread_;
};

}  // namespace sg

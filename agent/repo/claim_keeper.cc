#include "agent/repo/claim_keeper.h"

#include "common/log.h"

namespace sg {

ClaimKeeper::ClaimKeeper(ObjectStore& store, Clock& clock, std::string key,
                         nlohmann::ordered_json body, std::string etag, Clock::MonoTime sent,
                         ClaimTiming timing)
    : store_(store),
      clock_(clock),
      key_(std::move(key)),
      body_(std::move(body)),
      timing_(timing),
      etag_(std::move(etag)),
      last_sent_(sent) {}

ClaimKeeper::~ClaimKeeper() { Stop(); }

void ClaimKeeper::Start() {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_ && !broken_) {
      // Real time between renewals: the clock seam measures the gaps only.
      if (wake_.wait_for(lock, timing_.renew_every, [this] { return stop_; })) break;
      RenewLocked();
    }
  });
}

void ClaimKeeper::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool ClaimKeeper::RenewLocked() {
  if (broken_) return false;
  nlohmann::ordered_json body = body_;
  body["renewed"] = FormatUtc(clock_.Now(), /*millis=*/true);
  const Clock::MonoTime sent = clock_.Monotonic();
  auto put = store_.Put(key_, body.dump(), PutCondition::IfMatch(etag_));
  if (!put.ok() && put.status().Is(StatusCode::kPreconditionFailed) && AdoptOwnWriteLocked()) {
    // An earlier renewal landed although its answer was lost (a retried
    // PUT then finds its own write): renew again from what is there.
    put = store_.Put(key_, body.dump(), PutCondition::IfMatch(etag_));
  }
  const Clock::MonoTime answered = clock_.Monotonic();
  if (!put.ok()) {
    if (put.status().Is(StatusCode::kPreconditionFailed) ||
        put.status().Is(StatusCode::kNotFound)) {
      broken_ = "the claim " + key_ + " was removed or replaced (gc took this writer for dead)";
    } else {
      // A failed renewal is retried at the next one; the gap decides.
      LogWarn("renewing the claim {} failed: {}", key_, put.status().message());
    }
    return false;
  }
  if (answered - last_sent_ > timing_.longest_gap) {
    broken_ = "the claim " + key_ + " was not renewed for " +
              std::to_string(
                  std::chrono::duration_cast<std::chrono::seconds>(answered - last_sent_).count()) +
              " s, longer than the " + std::to_string(timing_.longest_gap.count()) +
              " s a collector may wait before it takes the writer for dead";
    return false;
  }
  etag_ = *put;
  last_sent_ = sent;
  ++renewals_;
  return true;
}

bool ClaimKeeper::AdoptOwnWriteLocked() {
  // Only this writer writes its claim's `writer` token: gc deletes claims
  // and never writes one, and another writer's claim of the same seq (once
  // gc deleted this one) carries its own token.
  if (!body_.contains("writer")) return false;
  ObjectInfo info;
  auto stored = store_.Get(key_, std::nullopt, &info);
  if (!stored.ok()) return false;
  auto parsed = nlohmann::json::parse(*stored, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || !parsed.contains("writer") || parsed["writer"] != body_["writer"]) {
    return false;
  }
  LogInfo("the claim {} holds a renewal of ours whose answer was lost; renewing from it", key_);
  etag_ = info.etag;
  return true;
}

Status ClaimKeeper::CheckHeld() {
  std::lock_guard<std::mutex> lock(mu_);
  // A last renewal that failed for the network leaves the claim as the
  // previous one left it: still held while that one is recent enough.
  if (!RenewLocked() && !broken_ && clock_.Monotonic() - last_sent_ > timing_.longest_gap) {
    broken_ = "the claim " + key_ + " could not be renewed for longer than " +
              std::to_string(timing_.longest_gap.count()) + " s";
  }
  if (broken_) return Status::Unavailable(*broken_ + "; this snapshot is not committed");
  return Status::Ok();
}

int ClaimKeeper::renewals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return renewals_;
}

}  // namespace sg

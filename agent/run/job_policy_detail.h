// Helpers shared by the two files of the job policy (agent/run/job_policy.cc:
// the observations; agent/run/job_policy_ending.cc: how a job ends). Internal:
// nothing else includes this.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/run/job_policy.h"

namespace sg::job_policy_detail {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Level = job_action::Log::Level;

// A trainer's last checkpoint may still be settling when it exits.
inline constexpr milliseconds kAfterExitSlack{200};
// A final upload still running kGiveUpBeforeStop (notice_budget.h) before a
// notice's deadline is given up on, so the trainer still gets its stop
// signal in time; after the stop (or when the notice came later than
// that), this long.
inline constexpr milliseconds kGiveUpLast{2'000};
// A periodic upload cancelled at a job's end is waited for this long at
// most: it may be at its commit, which saves uploading the same again.
inline constexpr milliseconds kCancelWait{2'000};
// The longest a member's trainer is given to stop when the node leaves a
// round (or the group).
inline constexpr milliseconds kLeaveGrace{10'000};
// A final upload that fails is tried this often at most.
inline constexpr int kFinalAttempts = 3;

inline double SecondsBetween(Clock::MonoTime from, Clock::MonoTime to) {
  return std::chrono::duration<double>(to - from).count();
}

inline nlohmann::ordered_json OrNull(const auto& optional) {
  return optional ? nlohmann::ordered_json(*optional) : nlohmann::ordered_json(nullptr);
}

inline void Say(JobActions& out, Level level, std::string message) {
  out.push_back(job_action::Log{level, std::move(message)});
}

}  // namespace sg::job_policy_detail

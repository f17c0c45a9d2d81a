// Helpers for the job policy's tests (job_policy_test.cc,
// job_policy_resume_test.cc): finding, counting and reading the actions a
// step of agent/run/job_policy.h returned.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agent/run/job_policy.h"

namespace sg::testing {

// The first action of type T; nullptr when there is none.
template <typename T>
const T* Find(const JobActions& actions) {
  for (const JobAction& action : actions) {
    if (const T* found = std::get_if<T>(&action)) return found;
  }
  return nullptr;
}

template <typename T>
int Count(const JobActions& actions) {
  int n = 0;
  for (const JobAction& action : actions) n += std::holds_alternative<T>(action) ? 1 : 0;
  return n;
}

// The index of the first action of type T; -1 when there is none.
template <typename T>
int IndexOf(const JobActions& actions) {
  for (size_t i = 0; i < actions.size(); ++i) {
    if (std::holds_alternative<T>(actions[i])) return static_cast<int>(i);
  }
  return -1;
}

// The kinds of the events recorded, in order.
inline std::vector<std::string> EventKinds(const JobActions& actions) {
  std::vector<std::string> kinds;
  for (const JobAction& action : actions) {
    if (const auto* e = std::get_if<job_action::RecordEvent>(&action)) kinds.push_back(e->kind);
  }
  return kinds;
}

// The first event of `kind`; nullptr when there is none.
inline const job_action::RecordEvent* FindEvent(const JobActions& actions, std::string_view kind) {
  for (const JobAction& action : actions) {
    if (const auto* e = std::get_if<job_action::RecordEvent>(&action); e && e->kind == kind) {
      return e;
    }
  }
  return nullptr;
}

// A spot notice read at `t`, its deadline `left` after it.
inline InterruptionEvent SpotNotice(PolicyTime t, std::chrono::seconds left) {
  InterruptionEvent e;
  e.kind = InterruptionEvent::Kind::kNotice;
  e.action = "terminate";
  e.time = t.wall + left;
  e.observed = t.wall;
  return e;
}

// Whether a logged line holds `text`.
inline bool Said(const JobActions& actions, std::string_view text) {
  for (const JobAction& action : actions) {
    if (const auto* log = std::get_if<job_action::Log>(&action);
        log && log->message.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace sg::testing

// The notice file (SPOTGUARD_NOTICE_FILE; docs/agent.md, "The notice
// file"): one format for one node and for a group. Trainers only need it to
// appear; what it holds says why. A notice's file is the event's JSON
// (InterruptionEvent::ToJson: kind, action, time, notice, observed, source,
// detail); a request that no notice of this node's made (a stop signal, a
// group's request after a notice on another node) has the same keys, with
// kind "request", action "checkpoint", notice false and a null time. In a
// group both carry the round.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agent/run/interruption_monitor.h"
#include "common/clock.h"
#include "common/status.h"

namespace sg {

nlohmann::ordered_json NoticeFileJson(const InterruptionEvent& event,
                                      std::optional<uint64_t> round = std::nullopt);
// `why`: what asked ("SIGTERM", "the group's request: notice on i-0abc").
nlohmann::ordered_json RequestFileJson(Clock::WallTime now, const std::string& why,
                                       std::optional<uint64_t> round = std::nullopt);
// The notice's file when `event` is given, else a request's saying `why`.
nlohmann::ordered_json NoticeOrRequestJson(const std::optional<InterruptionEvent>& event,
                                           const std::string& why, std::optional<uint64_t> round,
                                           Clock::WallTime now);
// Writes `body` to `path` atomically (a trainer never reads half of it).
Status WriteNoticeFile(const std::string& path, const nlohmann::ordered_json& body);

}  // namespace sg

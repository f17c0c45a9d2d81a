#include "agent/run/notice_file.h"

#include "common/files.h"

namespace sg {

nlohmann::ordered_json NoticeFileJson(const InterruptionEvent& event,
                                      std::optional<uint64_t> round) {
  nlohmann::ordered_json j = event.ToJson();
  if (round) j["round"] = *round;
  return j;
}

nlohmann::ordered_json RequestFileJson(Clock::WallTime now, const std::string& why,
                                       std::optional<uint64_t> round) {
  nlohmann::ordered_json j;
  j["kind"] = "request";
  j["action"] = "checkpoint";
  j["time"] = nullptr;
  j["notice"] = false;
  j["observed"] = FormatUtc(now, /*millis=*/true);
  j["source"] = why;
  if (round) j["round"] = *round;
  return j;
}

nlohmann::ordered_json NoticeOrRequestJson(const std::optional<InterruptionEvent>& event,
                                           const std::string& why, std::optional<uint64_t> round,
                                           Clock::WallTime now) {
  return event ? NoticeFileJson(*event, round) : RequestFileJson(now, why, round);
}

Status WriteNoticeFile(const std::string& path, const nlohmann::ordered_json& body) {
  return WriteFileAtomic(path, body.dump() + "\n");
}

}  // namespace sg

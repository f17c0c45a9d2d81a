// A doctor check's verdict in one call: ok, warn or FAIL with its detail.
// Internal to agent/doctor_*.cc.
#pragma once

#include <string>
#include <utility>

#include "agent/cli/doctor_command.h"

namespace sg::doctor_detail {

inline DoctorCheck Ok(std::string name, std::string detail) {
  return {std::move(name), CheckState::kOk, std::move(detail)};
}
inline DoctorCheck Warn(std::string name, std::string detail) {
  return {std::move(name), CheckState::kWarn, std::move(detail)};
}
inline DoctorCheck Fail(std::string name, std::string detail) {
  return {std::move(name), CheckState::kFail, std::move(detail)};
}

}  // namespace sg::doctor_detail

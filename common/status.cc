#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace sg {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kAlreadyExists:
      return "AlreadyExists";
    case StatusCode::kPreconditionFailed:
      return "PreconditionFailed";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kOutOfRange:
      return "OutOfRange";
    case StatusCode::kPermissionDenied:
      return "PermissionDenied";
    case StatusCode::kNoSpace:
      return "NoSpace";
    case StatusCode::kCorruption:
      return "Corruption";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kNotImplemented:
      return "NotImplemented";
    case StatusCode::kCancelled:
      return "Cancelled";
    case StatusCode::kIOError:
      return "IOError";
  }
  return "Unknown";
}

Status Status::FromErrno(int err, std::string_view context) {
  std::string msg(context);
  msg += ": ";
  msg += std::strerror(err);
  switch (err) {
    case ENOENT:
      return NotFound(std::move(msg));
    case EEXIST:
      return AlreadyExists(std::move(msg));
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDenied(std::move(msg));
    case ENOSPC:
    case EDQUOT:
      return NoSpace(std::move(msg));
    case EINVAL:
    case ENAMETOOLONG:
    case ENOTDIR:
    case EISDIR:
      return InvalidArgument(std::move(msg));
    default:
      return IOError(std::move(msg));
  }
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(StatusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += message_;
  return Status(code_, std::move(msg)).WithReason(reason_);
}

}  // namespace sg

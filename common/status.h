// Errors as values. A Status is OK or carries a code and a message that names
// what went wrong; StatusOr<T> carries a T or a non-OK Status.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace sg {

enum class StatusCode {
  kOk,
  kNotFound,            // the object, file or key does not exist
  kAlreadyExists,       // a create found something already there
  kPreconditionFailed,  // a conditional write lost (create-only or if-match)
  kInvalidArgument,     // the caller passed something malformed
  kOutOfRange,          // a byte range beyond the end of an object
  kPermissionDenied,
  kNoSpace,      // disk or quota full
  kCorruption,   // data failed a checksum or could not be parsed
  kUnavailable,  // transient: network, timeouts, 5xx; retrying may help
  kNotImplemented,
  kCancelled,
  kIOError,  // any other failure of the outside world
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status PreconditionFailed(std::string m) {
    return {StatusCode::kPreconditionFailed, std::move(m)};
  }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status PermissionDenied(std::string m) {
    return {StatusCode::kPermissionDenied, std::move(m)};
  }
  static Status NoSpace(std::string m) { return {StatusCode::kNoSpace, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status NotImplemented(std::string m) {
    return {StatusCode::kNotImplemented, std::move(m)};
  }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }

  // The one place that turns an errno into a Status. `context` says what was
  // being done, e.g. "open /data/ckpt/a.pt".
  static Status FromErrno(int err, std::string_view context);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  bool Is(StatusCode c) const { return code_ == c; }

  // "NotFound: no such object 'a/b'"; "OK" when ok.
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(std::string_view context) const;

  // A machine-readable cause finer than the code, e.g. the S3 error code
  // "SlowDown" or "SignatureDoesNotMatch"; empty when there is none.
  const std::string& reason() const { return reason_; }
  Status WithReason(std::string reason) const {
    Status s = *this;
    s.reason_ = std::move(reason);
    return s;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string reason_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "StatusOr needs a value or a non-OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace sg

// Propagates a non-OK Status from an expression to the caller.
#define SG_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::sg::Status sg_status_ = (expr);        \
    if (!sg_status_.ok()) return sg_status_; \
  } while (0)

#define SG_CONCAT_INNER(a, b) a##b
#define SG_CONCAT(a, b) SG_CONCAT_INNER(a, b)
// Declares `lhs` from a StatusOr expression, or returns its error.
#define SG_ASSIGN_OR_RETURN(lhs, expr) \
  SG_ASSIGN_OR_RETURN_IMPL(SG_CONCAT(sg_or_, __LINE__), lhs, expr)
#define SG_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

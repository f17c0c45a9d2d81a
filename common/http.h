// HTTP as a seam: HttpTransport is what the S3 and metadata clients call;
// CurlTransport is the real one (libcurl, wrapped only here), tests pass fakes.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/body_sink.h"
#include "common/status.h"

namespace sg {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// The reason() of a Send that failed before any byte of an answer arrived
// (refused, connect or answer timeout, reset before the status line), as
// opposed to one cut off while the answer was arriving.
inline constexpr char kNoAnswerReason[] = "NoAnswer";

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  HttpHeaders headers;
  std::string body;
  std::chrono::milliseconds timeout{30'000};  // whole request
  std::chrono::milliseconds connect_timeout{5'000};
  // Abort when fewer than 1 KiB/s flow for this long (0: never). Large
  // transfers use this instead of a total timeout.
  std::chrono::seconds stall_timeout{0};
  // Fail when no byte of the answer has come this long after the request
  // (with its body) was sent (0: never). Unlike `timeout` it does not cut
  // a long body short (docs/design.md §12). Checked about once a
  // second, so it may fire up to a second late.
  std::chrono::milliseconds answer_timeout{0};
  // Connect directly even when a proxy is configured (link-local services).
  bool no_proxy = false;
  // When set, the body of a 2xx answer goes here as it arrives instead of
  // into HttpResponse::body (the body of any other answer, an error, is kept
  // as usual). An error the sink returns ends the transfer and is what Send
  // returns. A transport may also ignore it and fill HttpResponse::body:
  // callers hand a non-empty body to the sink themselves.
  BodySink body_sink;
};

struct HttpResponse {
  long status = 0;
  HttpHeaders headers;  // names lower-cased
  std::string body;

  // First value of the header `name` (case-insensitive), or "" when absent.
  std::string Header(std::string_view name) const;
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  // Fails (Unavailable) only when no HTTP response arrived: connection refused
  // or reset, timeout, TLS failure; with reason() kNoAnswerReason when not a
  // byte of the answer came. Any HTTP status is a successful Send.
  virtual StatusOr<HttpResponse> Send(const HttpRequest& request) = 0;
};

// libcurl easy handles, reused between calls so connections stay open. TLS
// peer and host verification are always on; there is no switch to turn them
// off. Thread-safe: concurrent calls use separate handles.
class CurlTransport final : public HttpTransport {
 public:
  struct Options {
    // Extra CA certificates (AWS_CA_BUNDLE); the system store stays trusted.
    std::string ca_bundle;
  };
  CurlTransport() : CurlTransport(Options{}) {}
  explicit CurlTransport(Options options);
  ~CurlTransport() override;
  StatusOr<HttpResponse> Send(const HttpRequest& request) override;

 private:
  void* Borrow();
  void Return(void* handle);

  const Options options_;
  std::mutex mu_;
  std::vector<void*> idle_;  // CURL* handles
};

}  // namespace sg

// One signed AWS call, sent and retried in one place. The S3 and Auto Scaling
// clients build requests and read answers (pure functions); the executor here
// does everything in between: credentials from the provider (renewed when
// they near expiry), a fresh SigV4 signature for every attempt, the send, the
// judgement of the outcome by the service's rules, full-jitter backoff under
// the retry budget (retry.h), and correction of a skewed clock from the
// server's time.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/aws_credentials.h"
#include "common/clock.h"
#include "common/http.h"
#include "common/retry.h"
#include "common/status.h"

namespace sg {

// An AWS error answer, as S3 (<Error>) and the query APIs (<ErrorResponse>)
// both report it.
struct AwsErrorInfo {
  long http_status = 0;
  std::string code;  // "NoSuchKey", "ValidationError"; from the status when there is no body
  std::string message;
  std::string request_id;
};

// Reads an error document whose root element is `root`: S3's <Error>, or the
// query APIs' <ErrorResponse> holding <Error>. Code and Message come from the
// Error element, RequestId from it or else from the root; `type` (if not
// null) receives its Type ("Sender", "Receiver"). nullopt when `body` is not
// such a document.
std::optional<AwsErrorInfo> ParseAwsErrorXml(std::string_view body, const char* root,
                                             std::string* type = nullptr);

// `code` for an HTTP status: the name `names` gives it, else "HTTP<status>".
std::string CodeForHttpStatus(long status, const std::map<long, std::string>& names);

// Fills what an error body left out: the HTTP status, a code named after the
// status, and the request id from the header `request_id_header`.
void CompleteErrorInfo(AwsErrorInfo& error, const HttpResponse& response,
                       const std::map<long, std::string>& status_names,
                       std::string_view request_id_header);

// A service's own error codes, listed by the StatusCode they become.
using ErrorCodeGroups = std::vector<std::pair<StatusCode, std::vector<std::string>>>;

// The StatusCode for the error's code: the service's own `codes` first, then
// the codes every AWS service shares (credentials and signature problems are
// PermissionDenied; throttling, server failures and clock skew Unavailable).
// An unknown code is Unavailable when the server failed (5xx), else IOError.
StatusCode AwsErrorCode(const AwsErrorInfo& error, const ErrorCodeGroups& codes);

// "<what>: <code>[: <message>] (HTTP <status>[, request id <id>])" with
// reason() the service's code, so callers can tell errors apart.
Status AwsErrorStatus(StatusCode code, std::string_view what, const AwsErrorInfo& error);

// An attempt that got no HTTP answer: transient, unless retrying cannot help
// (the transport says so with anything but Unavailable, e.g. TLS verification).
Outcome ClassifyTransportFailure(const Status& failure);

// What a service's error answers mean for retrying.
struct ErrorOutcomes {
  // The service's error codes for each retryable outcome.
  std::set<std::string> clock_skew, throttled, server_error;
  // The HTTP statuses that are a server failure whatever the code says.
  std::function<bool(long status)> server_failed;
};

// The outcome of one attempt: a transport failure as ClassifyTransportFailure
// says; any 2xx a success (its body is never inspected: it may be a user's
// object that happens to be XML); else the error's code decides, where a
// clock-skew code wins over a 429 and a 429 over any other code; else a
// status `server_failed` names is a server error; else fatal.
Outcome ClassifyAwsAnswer(const StatusOr<HttpResponse>& response,
                          const std::function<AwsErrorInfo(const HttpResponse&)>& error_of,
                          const ErrorOutcomes& outcomes);

// What to send. Everything but `url` and `body` is covered by the signature.
struct SignedRequest {
  std::string method = "GET";
  std::string url;   // as sent: scheme, host, encoded path and query
  std::string host;  // the Host header
  std::string path;  // raw (unencoded) path, as SigV4 signs it
  std::vector<std::pair<std::string, std::string>> query;  // raw names and values
  HttpHeaders headers;  // besides host and the x-amz-* headers the signer adds
  std::string body;
  // Else UNSIGNED-PAYLOAD: a large body protected by Content-MD5 is not hashed twice.
  bool sign_payload = true;
  std::chrono::milliseconds timeout{30'000};  // per attempt; 0: none (see stall_timeout)
  std::chrono::seconds stall_timeout{0};
  // Per attempt: fail when no byte of the answer came this long after the
  // request was sent (0: none; HttpRequest::answer_timeout).
  std::chrono::milliseconds answer_timeout{0};
  // Per call: stop retrying once attempts have had no answer at all
  // (kNoAnswerReason) for this long, counted from the call's start or the
  // last attempt that got one, and fail with "no answer from ENDPOINT within
  // N s" (0: only the retry policy ends it; docs/design.md §12).
  std::chrono::milliseconds give_up_after{0};
  // Streams a successful answer's body (HttpRequest::body_sink).
  BodySink body_sink;
  // Names the call in errors and logs ("PutObject bkt/key", "Auto Scaling UpdateAutoScalingGroup").
  std::string what;
};

// How a service's answers are read. Per call, because one call may read its
// answers differently (S3's CompleteMultipartUpload can fail inside a 200).
struct AnswerRules {
  // What an attempt's result means for retrying.
  std::function<Outcome(const StatusOr<HttpResponse>&)> classify;
  // The Status of an HTTP answer `classify` did not call a success.
  std::function<Status(const HttpResponse&)> error;
};

// A time as AWS writes it: an HTTP date ("Sun, 22 Nov 2026 08:00:00 GMT") or
// ISO 8601 ("2026-11-22T08:00:00Z"); nullopt when it is neither.
std::optional<Clock::WallTime> ParseAwsTime(const std::string& text);

// The server's clock, from a clock-skew answer: <ServerTime> in the body (S3)
// or the Date header ("Sun, 22 Nov 2026 08:00:00 GMT"; ISO 8601 accepted).
std::optional<Clock::WallTime> ServerTimeOf(const HttpResponse& response);

// "https://host:port" of a URL: what "no answer from ..." names.
std::string EndpointOf(std::string_view url);

// Where a service's calls go, as the AWS tools resolve it: `configured`
// (non-empty), then the first of `env_names` set in `env`, then
// `default_endpoint`. A trailing '/' is dropped.
std::string ResolveServiceEndpoint(const std::optional<std::string>& configured,
                                   const std::vector<std::string>& env_names,
                                   const std::string& default_endpoint,
                                   const std::map<std::string, std::string>& env);
// "https://<prefix>.<region>.amazonaws.com" (".amazonaws.com.cn" for the cn- regions).
std::string AwsDefaultEndpoint(std::string_view prefix, const std::string& region);

// An endpoint URL cut for a SignedRequest: "https://host:port/base" ->
// scheme "https://", authority "host:port", path "/base" ("/" when none).
struct EndpointParts {
  std::string scheme, authority, path;
};
// nullopt unless `endpoint` is an http:// or https:// URL with a host.
std::optional<EndpointParts> SplitEndpoint(const std::string& endpoint);
// A POST to `endpoint` (its url, host and path set); InvalidArgument naming
// `service` ("EC2 endpoint \"x\" must be an http(s):// URL") when it is not one.
StatusOr<SignedRequest> PostTo(const std::string& endpoint, std::string_view service);

// Ordered (name, value) pairs of a query API call (Auto Scaling, EC2),
// without the signature.
using QueryParameters = std::vector<std::pair<std::string, std::string>>;
// "Action=<action>&Version=<version>&<name>=<value>..." with names and
// values percent-encoded (RFC 3986: all but A-Za-z0-9-._~).
std::string BuildQueryBody(std::string_view action, std::string_view version,
                           const QueryParameters& parameters);

class SignedCallExecutor {
 public:
  struct Options {
    std::string service;  // SigV4 service: "s3", "autoscaling"
    std::string region;
    std::string display_name;  // "S3", "Auto Scaling": for log lines
    RetryPolicy retry;
  };

  // The budget is this executor's: a client owns one executor, so all its
  // calls draw on one budget, as retry.h wants.
  SignedCallExecutor(HttpTransport& transport, CredentialsProvider& credentials, Clock& clock,
                     Options options, UniformRandom random = DefaultRandom());

  // Sends `request` until it succeeds, fails in a way retrying cannot help,
  // or the attempts or the budget run out; returns the successful answer or
  // the last failure (`rules.error` for an HTTP answer, the transport's
  // Status with `request.what` as context otherwise). A clock-skew answer is
  // resent at once, signed with the server's time; later calls keep the
  // offset. Credentials errors are returned as they are.
  // Takes `request` by value so a large body can be moved in, not copied.
  StatusOr<HttpResponse> Execute(SignedRequest request, const AnswerRules& rules);

  // How far the server's clock is ahead of ours, learnt from a clock-skew
  // answer and applied to every later signature.
  std::chrono::seconds clock_offset() const { return std::chrono::seconds(clock_offset_s_.load()); }
  const Options& options() const { return options_; }

 private:
  HttpTransport& transport_;
  CredentialsProvider& credentials_;
  Clock& clock_;
  const Options options_;
  const UniformRandom random_;
  RetryBudget budget_;
  std::atomic<int64_t> clock_offset_s_{0};
};

}  // namespace sg

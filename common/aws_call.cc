#include "common/aws_call.h"

#include <algorithm>
#include <ctime>
#include <pugixml.hpp>

#include "common/crypto.h"
#include "common/log.h"
#include "common/sigv4.h"
#include "common/spare_buffer.h"
#include "common/strings.h"

namespace sg {

std::optional<Clock::WallTime> ParseAwsTime(const std::string& text) {
  std::tm tm{};
  if (strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S", &tm) != nullptr ||
      strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) != nullptr) {
    return WallTimeFromUtc(tm);
  }
  return std::nullopt;
}

std::optional<AwsErrorInfo> ParseAwsErrorXml(std::string_view body, const char* root,
                                             std::string* type) {
  if (body.find(std::string("<") + root) == std::string_view::npos) return std::nullopt;
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size())) return std::nullopt;
  const pugi::xml_node top = doc.child(root);
  const pugi::xml_node err = std::string_view(root) == "Error" ? top : top.child("Error");
  if (!err) return std::nullopt;
  auto text = [](const pugi::xml_node& node, const char* name) -> std::string {
    return node.child(name).text().as_string();
  };
  AwsErrorInfo e;
  e.code = text(err, "Code");
  e.message = text(err, "Message");
  if (type != nullptr) *type = text(err, "Type");
  e.request_id = text(err, "RequestId");
  if (e.request_id.empty()) e.request_id = text(top, "RequestId");
  return e;
}

std::string CodeForHttpStatus(long status, const std::map<long, std::string>& names) {
  auto it = names.find(status);
  return it != names.end() ? it->second : "HTTP" + std::to_string(status);
}

void CompleteErrorInfo(AwsErrorInfo& error, const HttpResponse& response,
                       const std::map<long, std::string>& status_names,
                       std::string_view request_id_header) {
  error.http_status = response.status;
  if (error.code.empty()) error.code = CodeForHttpStatus(response.status, status_names);
  if (error.request_id.empty()) error.request_id = response.Header(request_id_header);
}

StatusCode AwsErrorCode(const AwsErrorInfo& error, const ErrorCodeGroups& codes) {
  static const ErrorCodeGroups kShared = {
      {StatusCode::kPermissionDenied,
       {"AccessDenied", "AccessDeniedException", "NotAuthorized", "UnauthorizedOperation",
        "InvalidAccessKeyId", "InvalidClientTokenId", "SignatureDoesNotMatch",
        "IncompleteSignature", "MissingAuthenticationToken", "ExpiredToken", "InvalidToken",
        "OptInRequired"}},
      {StatusCode::kUnavailable,
       {"SlowDown", "Throttling", "ThrottlingException", "ServiceUnavailable", "InternalError",
        "InternalFailure", "RequestTimeout", "RequestTimeTooSkewed", "RequestExpired"}},
  };
  for (const ErrorCodeGroups* table : {&codes, &kShared}) {
    for (const auto& [status_code, names] : *table) {
      if (std::find(names.begin(), names.end(), error.code) != names.end()) return status_code;
    }
  }
  return error.http_status >= 500 ? StatusCode::kUnavailable : StatusCode::kIOError;
}

Status AwsErrorStatus(StatusCode code, std::string_view what, const AwsErrorInfo& error) {
  std::string msg = std::string(what) + ": " + error.code;
  if (!error.message.empty()) msg += ": " + error.message;
  msg += " (HTTP " + std::to_string(error.http_status);
  if (!error.request_id.empty()) msg += ", request id " + error.request_id;
  msg += ")";
  return Status(code, std::move(msg)).WithReason(error.code);
}

Outcome ClassifyTransportFailure(const Status& failure) {
  return failure.Is(StatusCode::kUnavailable) ? Outcome::kTransient : Outcome::kFatal;
}

Outcome ClassifyAwsAnswer(const StatusOr<HttpResponse>& response,
                          const std::function<AwsErrorInfo(const HttpResponse&)>& error_of,
                          const ErrorOutcomes& outcomes) {
  if (!response.ok()) return ClassifyTransportFailure(response.status());
  const long status = response->status;
  if (status >= 200 && status < 300) return Outcome::kSuccess;
  const std::string code = error_of(*response).code;
  if (outcomes.clock_skew.contains(code)) return Outcome::kClockSkew;
  if (status == 429 || outcomes.throttled.contains(code)) return Outcome::kThrottled;
  if (outcomes.server_error.contains(code)) return Outcome::kServerError;
  if (outcomes.server_failed && outcomes.server_failed(status)) return Outcome::kServerError;
  return Outcome::kFatal;
}

std::optional<Clock::WallTime> ServerTimeOf(const HttpResponse& response) {
  constexpr std::string_view kTag = "<ServerTime>";
  if (auto pos = response.body.find(kTag); pos != std::string::npos) {
    if (auto t = ParseAwsTime(response.body.substr(pos + kTag.size(), 20))) return t;
  }
  const std::string date = response.Header("date");
  if (date.empty()) return std::nullopt;
  return ParseAwsTime(date);
}

std::string EndpointOf(std::string_view url) {
  const size_t scheme = url.find("://");
  const size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
  return std::string(url.substr(0, url.find_first_of("/?", start)));
}

std::string ResolveServiceEndpoint(const std::optional<std::string>& configured,
                                   const std::vector<std::string>& env_names,
                                   const std::string& default_endpoint,
                                   const std::map<std::string, std::string>& env) {
  std::string endpoint = configured.value_or("");
  for (const std::string& name : env_names) {
    if (endpoint.empty()) endpoint = EnvOr(env, name);
  }
  if (endpoint.empty()) endpoint = default_endpoint;
  while (endpoint.size() > 1 && endpoint.back() == '/') endpoint.pop_back();
  return endpoint;
}

std::string AwsDefaultEndpoint(std::string_view prefix, const std::string& region) {
  const std::string suffix = region.starts_with("cn-") ? ".amazonaws.com.cn" : ".amazonaws.com";
  return "https://" + std::string(prefix) + "." + region + suffix;
}

std::optional<EndpointParts> SplitEndpoint(const std::string& endpoint) {
  const size_t sep = endpoint.find("://");
  if (sep == std::string::npos) return std::nullopt;
  EndpointParts p;
  p.scheme = endpoint.substr(0, sep + 3);
  if (p.scheme != "http://" && p.scheme != "https://") return std::nullopt;
  const std::string rest = endpoint.substr(sep + 3);
  const size_t slash = rest.find('/');
  p.authority = rest.substr(0, slash);
  p.path = slash == std::string::npos ? "/" : rest.substr(slash);
  if (p.authority.empty()) return std::nullopt;
  return p;
}

StatusOr<SignedRequest> PostTo(const std::string& endpoint, std::string_view service) {
  const std::optional<EndpointParts> parts = SplitEndpoint(endpoint);
  if (!parts) {
    return Status::InvalidArgument(std::string(service) + " endpoint \"" + endpoint +
                                   "\" must be an http(s):// URL");
  }
  SignedRequest request;
  request.method = "POST";
  request.url = parts->scheme + parts->authority + parts->path;
  request.host = parts->authority;
  request.path = parts->path;
  return request;
}

std::string BuildQueryBody(std::string_view action, std::string_view version,
                           const QueryParameters& parameters) {
  std::string body = "Action=" + UriEncode(action, /*keep_slash=*/false) +
                     "&Version=" + UriEncode(version, false);
  for (const auto& [name, value] : parameters) {
    body += "&" + UriEncode(name, false) + "=" + UriEncode(value, false);
  }
  return body;
}

namespace {

// The call gave up on an endpoint that never answered (docs/design.md §12).
Status NoAnswerStatus(const SignedRequest& request, std::chrono::milliseconds bound, int attempts,
                      const Status& last) {
  return Status::Unavailable(
             Format("{}: no answer from {} within {:.0f} s ({} attempt{}; the last: {})",
                    request.what, EndpointOf(request.url),
                    std::chrono::duration<double>(bound).count(), attempts,
                    attempts == 1 ? "" : "s", last.message()))
      .WithReason(kNoAnswerReason);
}

// The HTTP request of every attempt of `request`, whose body (and body
// sink) it takes; an attempt adds the signed headers.
HttpRequest AttemptHttpRequestOf(SignedRequest& request) {
  HttpRequest http;
  http.method = request.method;
  http.url = request.url;
  http.body = std::move(request.body);
  http.timeout = request.timeout;
  http.stall_timeout = request.stall_timeout;
  http.answer_timeout = request.answer_timeout;
  http.body_sink = std::move(request.body_sink);
  return http;
}

// What SigV4 signs of `request`, whose payload hashes to `payload_hash`.
SigningRequest AttemptSigningRequestOf(const SignedRequest& request,
                                       const std::string& payload_hash) {
  SigningRequest signing;
  signing.method = request.method;
  signing.path = request.path;
  signing.query = request.query;
  signing.headers = request.headers;
  signing.headers.emplace_back("host", request.host);
  signing.payload_sha256_hex = payload_hash;
  return signing;
}

}  // namespace

SignedCallExecutor::SignedCallExecutor(HttpTransport& transport, CredentialsProvider& credentials,
                                       Clock& clock, Options options, UniformRandom random)
    : transport_(transport),
      credentials_(credentials),
      clock_(clock),
      options_(std::move(options)),
      random_(std::move(random)),
      budget_(options_.retry.budget_capacity) {}

StatusOr<HttpResponse> SignedCallExecutor::Execute(SignedRequest request,
                                                   const AnswerRules& rules) {
  const std::string payload_hash =
      request.sign_payload ? Sha256Hex(request.body) : std::string(kUnsignedPayload);
  // Built once: only the signed headers change between attempts, so a body
  // (up to a part's size) is never copied per attempt.
  HttpRequest http = AttemptHttpRequestOf(request);
  // A large body (a part) goes back to the shared pool once the call is
  // done, for the next part (common/spare_buffer.h).
  struct BodyBack {
    HttpRequest& http;
    ~BodyBack() { GiveSharedBuffer(std::move(http.body)); }
  } body_back{http};
  const int max_attempts = options_.retry.max_attempts;
  const auto give_up = request.give_up_after;
  // Since when no attempt has had an answer (docs/design.md §12).
  Clock::MonoTime silent_since = clock_.Monotonic();
  auto silent_for = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Monotonic() - silent_since);
  };
  for (int attempt = 1;; ++attempt) {
    if (give_up.count() > 0) {
      // No attempt outlives the bound: its answer timeout is what is left.
      const auto left = std::max(std::chrono::milliseconds(1000), give_up - silent_for());
      http.answer_timeout =
          request.answer_timeout.count() > 0 ? std::min(request.answer_timeout, left) : left;
    }
    SG_ASSIGN_OR_RETURN(AwsCredentials creds, credentials_.Get());
    SigningRequest signing = AttemptSigningRequestOf(request, payload_hash);
    SignRequest(signing, creds, options_.region, options_.service, clock_.Now() + clock_offset());
    http.headers = std::move(signing.headers);
    StatusOr<HttpResponse> response = transport_.Send(http);

    const Outcome outcome = rules.classify(response);
    if (outcome == Outcome::kSuccess) {
      if (attempt == 1) budget_.OnSuccess();
      return response;
    }
    const bool silent = !response.ok() && response.status().reason() == kNoAnswerReason;
    if (!silent) silent_since = clock_.Monotonic();
    Status failure =
        response.ok() ? rules.error(*response) : response.status().WithContext(request.what);
    if (outcome == Outcome::kClockSkew) {
      // Sign with the server's time from now on, and resend at once: waiting
      // does not make a clock right.
      const std::optional<Clock::WallTime> server_time =
          response.ok() ? ServerTimeOf(*response) : std::nullopt;
      if (server_time) {
        const auto offset =
            std::chrono::duration_cast<std::chrono::seconds>(*server_time - clock_.Now());
        clock_offset_s_.store(offset.count());
        LogWarn("{} says our clock is off; signing with an offset of {}s from now on",
                options_.display_name, offset.count());
      }
      if (attempt >= max_attempts || !server_time) return failure;
      continue;
    }
    const Duration wait = BackoffDelay(options_.retry, attempt, random_);
    if (silent && give_up.count() > 0 && silent_for() + wait >= give_up) {
      return NoAnswerStatus(request, give_up, attempt, response.status());
    }
    if (!IsRetryable(outcome)) return failure;
    if (attempt >= max_attempts || !budget_.TryAcquire(outcome)) {
      // Said, so that every throttle or server error an attempt met is in
      // the debug log once, retried or not.
      LogDebug("{}: {} on attempt {}, not retried: {}", request.what, OutcomeName(outcome), attempt,
               attempt >= max_attempts ? "that was the last attempt" : "the retry budget is spent");
      return failure;
    }
    LogDebug("{}: {} on attempt {}, retrying in {}ms", request.what, OutcomeName(outcome), attempt,
             wait.count());
    clock_.SleepFor(wait);
  }
}

}  // namespace sg

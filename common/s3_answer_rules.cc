// S3 errors: the error an answer carries (from its <Error> body, else its
// HTTP status), what it means for retrying (ClassifyS3Response), the Status a
// failed call returns (S3ErrorStatus), and the rules that hand these to the
// SignedCallExecutor.
#include "common/s3_answer_rules.h"

#include <map>
#include <optional>

#include "common/s3_client.h"

namespace sg {
namespace {

S3ErrorInfo ErrorOf(const HttpResponse& resp) {
  static const std::map<long, std::string> kStatusCodes = {
      {403, "AccessDenied"},       {404, "NoSuchKey"},    {409, "ConditionalRequestConflict"},
      {412, "PreconditionFailed"}, {416, "InvalidRange"}, {500, "InternalError"},
      {503, "ServiceUnavailable"},
  };
  S3ErrorInfo e = ParseS3ErrorXml(resp.body).value_or(S3ErrorInfo{});
  CompleteErrorInfo(e, resp, kStatusCodes, "x-amz-request-id");
  return e;
}

// CompleteMultipartUpload can fail after sending 200 OK, with an <Error> in
// the body: the answer as the 5xx it stands for, so it is judged (and
// retried) like one. nullopt for any other answer.
std::optional<HttpResponse> FailureInside200(const HttpResponse& resp) {
  if (resp.status < 200 || resp.status >= 300) return std::nullopt;
  auto error = ParseS3ErrorXml(resp.body);
  if (!error) return std::nullopt;
  HttpResponse failed = resp;
  failed.status = error->code == "SlowDown" ? 503 : 500;
  return failed;
}

}  // namespace

namespace s3_detail {

// How the executor reads S3's answers to one call.
AnswerRules S3Rules(std::string operation, std::string resource, bool error_in_200) {
  AnswerRules rules;
  rules.classify = [error_in_200](const StatusOr<HttpResponse>& resp) {
    if (error_in_200 && resp.ok()) {
      if (auto failed = FailureInside200(*resp)) return ClassifyS3Response(*failed);
    }
    return ClassifyS3Response(resp);
  };
  rules.error = [operation = std::move(operation), resource = std::move(resource),
                 error_in_200](const HttpResponse& resp) {
    std::optional<HttpResponse> failed = error_in_200 ? FailureInside200(resp) : std::nullopt;
    return S3ErrorStatus(operation, resource, ErrorOf(failed ? *failed : resp));
  };
  return rules;
}

}  // namespace s3_detail

Outcome ClassifyS3Response(const StatusOr<HttpResponse>& response) {
  static const ErrorOutcomes kOutcomes = {
      .clock_skew = {"RequestTimeTooSkewed"},
      .throttled = {"SlowDown", "Throttling", "RequestLimitExceeded"},
      // ConditionalRequestConflict: a conflicting conditional write is in
      // progress, and AWS asks to retry.
      .server_error = {"ConditionalRequestConflict", "RequestTimeout", "InternalError"},
      // Not 501 (NotImplemented) or 505: retrying cannot help there.
      .server_failed = [](long s) { return s == 500 || s == 502 || s == 503 || s == 504; }};
  // S3Rules checks <Error> in the 200s where S3 sends them.
  return ClassifyAwsAnswer(response, ErrorOf, kOutcomes);
}

Status S3ErrorStatus(const std::string& operation, const std::string& resource,
                     const S3ErrorInfo& e) {
  static const ErrorCodeGroups kCodes = {
      {StatusCode::kNotFound, {"NoSuchKey", "NoSuchBucket", "NoSuchUpload"}},
      {StatusCode::kPreconditionFailed, {"PreconditionFailed", "ConditionalRequestConflict"}},
      {StatusCode::kOutOfRange, {"InvalidRange"}},
      {StatusCode::kInvalidArgument,
       {"InvalidPart", "InvalidPartOrder", "EntityTooSmall", "EntityTooLarge"}},
      {StatusCode::kCorruption, {"BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch"}},
  };
  return AwsErrorStatus(AwsErrorCode(e, kCodes), operation + " " + resource, e);
}

}  // namespace sg

// AWS Signature Version 4 for S3, as pure functions: the signing time is an
// argument, nothing here does I/O, and every intermediate string is exposed so
// tests can compare against the published examples step by step.
//
// S3's rules differ from other services: the path is URI-encoded exactly once
// and never normalised ("a/./b" and "a//b" are distinct keys), and every
// request carries x-amz-content-sha256.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace sg {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;  // never logged
  std::string session_token;      // empty for long-term keys; never logged
};

inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";

// What the signature covers. `path` is the raw (unencoded) path, starting
// with '/'; `query` holds raw names and values.
struct SigningRequest {
  std::string method;
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
  std::vector<std::pair<std::string, std::string>> headers;  // must include host
  std::string payload_sha256_hex;                            // or kUnsignedPayload
};

// RFC 3986 percent-encoding as SigV4 wants it: every byte except A-Z a-z 0-9
// - . _ ~ becomes %XX (upper-case hex); '/' is kept when `keep_slash`.
std::string UriEncode(std::string_view s, bool keep_slash);

// "20130524T000000Z" and "20130524".
std::string AmzDate(Clock::WallTime t);
std::string AmzDay(Clock::WallTime t);

std::string CanonicalQueryString(const std::vector<std::pair<std::string, std::string>>& query);
// Lower-cased names, trimmed values with inner runs of spaces folded, sorted by
// name. Returns the canonical header block (each "name:value\n") and the
// signed-headers list ("host;range;x-amz-date").
std::pair<std::string, std::string> CanonicalHeaders(
    const std::vector<std::pair<std::string, std::string>>& headers);
std::string CanonicalRequest(const SigningRequest& request);
std::string CredentialScope(std::string_view day, std::string_view region,
                            std::string_view service);
std::string StringToSign(std::string_view amz_date, std::string_view scope,
                         std::string_view canonical_request);
std::string SigningKey(std::string_view secret, std::string_view day, std::string_view region,
                       std::string_view service);
std::string SignatureHex(std::string_view signing_key, std::string_view string_to_sign);

// Adds x-amz-date, x-amz-content-sha256, x-amz-security-token (when the
// credentials have one) and Authorization to `request.headers`, replacing any
// earlier values of them (a retried request is signed afresh).
void SignRequest(SigningRequest& request, const AwsCredentials& credentials,
                 std::string_view region, std::string_view service, Clock::WallTime now);

}  // namespace sg

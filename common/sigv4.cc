#include "common/sigv4.h"

#include <algorithm>
#include <cctype>
#include <ctime>

#include "common/crypto.h"
#include "common/strings.h"

namespace sg {
namespace {

std::string FormatTime(Clock::WallTime t, const char* format) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  const size_t n = std::strftime(buf, sizeof buf, format, &tm);
  return std::string(buf, n);
}

// Trims and folds runs of spaces into one, as SigV4 asks of header values.
std::string CanonicalHeaderValue(std::string_view v) {
  v = Trim(v);
  std::string out;
  bool in_space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      if (!in_space) out += ' ';
      in_space = true;
    } else {
      out += c;
      in_space = false;
    }
  }
  return out;
}

void SetHeader(std::vector<std::pair<std::string, std::string>>& headers, std::string_view name,
               std::string value) {
  std::erase_if(headers, [&](const auto& h) { return ToLower(h.first) == name; });
  headers.emplace_back(std::string(name), std::move(value));
}

}  // namespace

std::string UriEncode(std::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string AmzDate(Clock::WallTime t) { return FormatTime(t, "%Y%m%dT%H%M%SZ"); }
std::string AmzDay(Clock::WallTime t) { return FormatTime(t, "%Y%m%d"); }

std::string CanonicalQueryString(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [k, v] : query) encoded.emplace_back(UriEncode(k, false), UriEncode(v, false));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [k, v] : encoded) {
    if (!out.empty()) out += '&';
    out += k;
    out += '=';
    out += v;
  }
  return out;
}

std::pair<std::string, std::string> CanonicalHeaders(
    const std::vector<std::pair<std::string, std::string>>& headers) {
  std::vector<std::pair<std::string, std::string>> lowered;
  for (const auto& [k, v] : headers)
    lowered.emplace_back(ToLower(Trim(k)), CanonicalHeaderValue(v));
  std::stable_sort(lowered.begin(), lowered.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string block, names;
  for (size_t i = 0; i < lowered.size(); ++i) {
    // Repeated headers are joined with commas under one name.
    if (i > 0 && lowered[i].first == lowered[i - 1].first) {
      block.pop_back();  // the '\n'
      block += ',' + lowered[i].second + '\n';
      continue;
    }
    block += lowered[i].first + ':' + lowered[i].second + '\n';
    if (!names.empty()) names += ';';
    names += lowered[i].first;
  }
  return {block, names};
}

std::string CanonicalRequest(const SigningRequest& r) {
  const auto [header_block, signed_headers] = CanonicalHeaders(r.headers);
  return r.method + '\n' + UriEncode(r.path, /*keep_slash=*/true) + '\n' +
         CanonicalQueryString(r.query) + '\n' + header_block + '\n' + signed_headers + '\n' +
         r.payload_sha256_hex;
}

std::string CredentialScope(std::string_view day, std::string_view region,
                            std::string_view service) {
  return std::string(day) + '/' + std::string(region) + '/' + std::string(service) +
         "/aws4_request";
}

std::string StringToSign(std::string_view amz_date, std::string_view scope,
                         std::string_view canonical_request) {
  return "AWS4-HMAC-SHA256\n" + std::string(amz_date) + '\n' + std::string(scope) + '\n' +
         Sha256Hex(canonical_request);
}

std::string SigningKey(std::string_view secret, std::string_view day, std::string_view region,
                       std::string_view service) {
  const std::string k_date = HmacSha256("AWS4" + std::string(secret), day);
  const std::string k_region = HmacSha256(k_date, region);
  const std::string k_service = HmacSha256(k_region, service);
  return HmacSha256(k_service, "aws4_request");
}

std::string SignatureHex(std::string_view signing_key, std::string_view string_to_sign) {
  return HexEncode(HmacSha256(signing_key, string_to_sign));
}

void SignRequest(SigningRequest& request, const AwsCredentials& credentials,
                 std::string_view region, std::string_view service, Clock::WallTime now) {
  std::erase_if(request.headers, [](const auto& h) { return ToLower(h.first) == "authorization"; });
  const std::string amz_date = AmzDate(now);
  const std::string day = AmzDay(now);
  SetHeader(request.headers, "x-amz-date", amz_date);
  SetHeader(request.headers, "x-amz-content-sha256", request.payload_sha256_hex);
  if (!credentials.session_token.empty()) {
    SetHeader(request.headers, "x-amz-security-token", credentials.session_token);
  } else {
    std::erase_if(request.headers,
                  [](const auto& h) { return ToLower(h.first) == "x-amz-security-token"; });
  }
  const std::string scope = CredentialScope(day, region, service);
  const std::string canonical = CanonicalRequest(request);
  const std::string signature =
      SignatureHex(SigningKey(credentials.secret_access_key, day, region, service),
                   StringToSign(amz_date, scope, canonical));
  const std::string signed_headers = CanonicalHeaders(request.headers).second;
  request.headers.emplace_back(
      "Authorization", "AWS4-HMAC-SHA256 Credential=" + credentials.access_key_id + '/' + scope +
                           ", SignedHeaders=" + signed_headers + ", Signature=" + signature);
}

}  // namespace sg

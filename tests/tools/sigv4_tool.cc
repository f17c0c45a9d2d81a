// Signs requests with common/sigv4 for tests/tools/sigv4_crosscheck.py.
//
// Reads one JSON object a line on stdin:
//   {"method": "PUT", "path": "/bucket/raw key", "query": [["uploads", ""]],
//    "headers": [["Host", "127.0.0.1:9000"]], "payload_sha256": "<hex or UNSIGNED-PAYLOAD>",
//    "access_key": "...", "secret_key": "...", "session_token": "",
//    "region": "us-east-1", "service": "s3", "amz_date": "20261122T083000Z"}
// and prints one JSON object a line:
//   {"canonical_request": "...", "authorization": "AWS4-HMAC-SHA256 Credential=..."}
// or {"error": "..."} for a line it cannot use. Exit status 0 unless stdin
// could not be read.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/sigv4.h"
#include "common/strings.h"

namespace {

using sg::Clock;

// "20261122T083000Z" -> a system_clock time point.
bool ParseAmzDate(const std::string& s, Clock::WallTime* out) {
  int y = 0;
  unsigned mo = 0, d = 0, h = 0, mi = 0, se = 0;
  char z = 0;
  if (s.size() != 16 ||
      std::sscanf(s.c_str(), "%4d%2u%2u%*1[T]%2u%2u%2u%c", &y, &mo, &d, &h, &mi, &se, &z) != 7 ||
      z != 'Z') {
    return false;
  }
  const std::chrono::year_month_day ymd{std::chrono::year{y}, std::chrono::month{mo},
                                        std::chrono::day{d}};
  if (!ymd.ok() || h > 23 || mi > 59 || se > 59) return false;
  *out = std::chrono::sys_days{ymd} + std::chrono::hours{h} + std::chrono::minutes{mi} +
         std::chrono::seconds{se};
  return true;
}

std::vector<std::pair<std::string, std::string>> Pairs(const nlohmann::json& j) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : j) out.emplace_back(p.at(0).get<std::string>(), p.at(1).get<std::string>());
  return out;
}

nlohmann::json SignOne(const nlohmann::json& in) {
  sg::SigningRequest request;
  request.method = in.at("method").get<std::string>();
  request.path = in.at("path").get<std::string>();
  request.query = Pairs(in.at("query"));
  request.headers = Pairs(in.at("headers"));
  request.payload_sha256_hex = in.at("payload_sha256").get<std::string>();
  const sg::AwsCredentials credentials{in.at("access_key").get<std::string>(),
                                       in.at("secret_key").get<std::string>(),
                                       in.value("session_token", std::string())};
  Clock::WallTime now;
  if (!ParseAmzDate(in.at("amz_date").get<std::string>(), &now)) {
    return {{"error", "bad amz_date"}};
  }
  sg::SignRequest(request, credentials, in.at("region").get<std::string>(),
                  in.at("service").get<std::string>(), now);

  std::string authorization;
  sg::SigningRequest unsigned_view = request;  // what the signature covered
  std::erase_if(unsigned_view.headers, [&](const auto& h) {
    if (sg::ToLower(h.first) != "authorization") return false;
    authorization = h.second;
    return true;
  });
  return {{"canonical_request", sg::CanonicalRequest(unsigned_view)},
          {"authorization", authorization}};
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    nlohmann::json out;
    try {
      out = SignOne(nlohmann::json::parse(line));
    } catch (const std::exception& e) {
      out = {{"error", e.what()}};
    }
    std::cout << out.dump() << '\n';
  }
  std::cout.flush();
  return std::cin.bad() ? 1 : 0;
}

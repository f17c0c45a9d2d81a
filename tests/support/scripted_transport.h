// A fake HttpTransport for unit tests: answers from a script, in order; when
// the script runs out, `forever` (if set) answers every further request, else
// the request fails as if nothing answered. Records every request sent.
#pragma once

#include <algorithm>
#include <cctype>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "common/http.h"

namespace sg::testing {

// The first value of header `name` (case-insensitive) in a sent request, or "".
inline std::string SentHeader(const HttpRequest& request, std::string_view name) {
  for (const auto& [k, v] : request.headers) {
    if (k.size() == name.size() && std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return v;
    }
  }
  return "";
}

class ScriptedTransport final : public HttpTransport {
 public:
  StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    sent.push_back(request);
    if (!replies.empty()) {
      auto r = replies.front();
      replies.pop_front();
      return r;
    }
    if (forever) return *forever;
    return Status::Unavailable(exhausted_message);
  }
  static HttpResponse Response(long status, std::string body = "", HttpHeaders headers = {}) {
    HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    r.headers = std::move(headers);
    return r;
  }
  void Reply(long status, std::string body = "", HttpHeaders headers = {}) {
    replies.push_back(Response(status, std::move(body), std::move(headers)));
  }
  // The next request gets no HTTP answer.
  void ConnectionReset() { replies.push_back(Status::Unavailable("Connection reset by peer")); }

  std::deque<StatusOr<HttpResponse>> replies;
  std::optional<StatusOr<HttpResponse>> forever;
  std::string exhausted_message = "no scripted reply";
  std::vector<HttpRequest> sent;
};

}  // namespace sg::testing

// A fake HttpTransport for unit tests: answers from a script, in order; when
// the script runs out, `forever` (if set) answers every further request, else
// the request fails as if nothing answered. Records every request sent.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "common/http.h"

namespace sg::testing {

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

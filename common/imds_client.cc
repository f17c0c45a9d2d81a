#include "common/imds_client.h"

namespace sg {

ImdsClient::ImdsClient(HttpTransport& transport, Clock& clock, Options options)
    : transport_(transport), clock_(clock), options_(std::move(options)) {}

StatusOr<std::string> ImdsClient::Token(bool force_new) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = clock_.Monotonic();
  if (!force_new && !token_.empty() && now + options_.refresh_margin < token_expiry_) {
    return token_;
  }
  HttpRequest req;
  req.method = "PUT";
  req.url = options_.endpoint + "/latest/api/token";
  req.headers = {
      {"X-aws-ec2-metadata-token-ttl-seconds", std::to_string(options_.token_ttl.count())}};
  req.timeout = options_.timeout;
  req.connect_timeout = options_.timeout;
  req.no_proxy = true;
  SG_ASSIGN_OR_RETURN(HttpResponse resp, transport_.Send(req));
  if (resp.status != 200 || resp.body.empty()) {
    token_.clear();
    return Status::Unavailable("IMDS token request to " + options_.endpoint + " answered HTTP " +
                               std::to_string(resp.status));
  }
  token_ = resp.body;
  token_expiry_ = now + options_.token_ttl;
  return token_;
}

StatusOr<std::string> ImdsClient::Get(std::string_view path) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    SG_ASSIGN_OR_RETURN(std::string token, Token(/*force_new=*/attempt > 0));
    HttpRequest req;
    req.url = options_.endpoint + "/latest/" + std::string(path);
    req.headers = {{"X-aws-ec2-metadata-token", token}};
    req.timeout = options_.timeout;
    req.connect_timeout = options_.timeout;
    req.no_proxy = true;
    SG_ASSIGN_OR_RETURN(HttpResponse resp, transport_.Send(req));
    if (resp.status == 200) return std::move(resp.body);
    if (resp.status == 404) return Status::NotFound("IMDS has no " + std::string(path));
    if (resp.status == 401) continue;  // token expired or revoked: take a new one once
    return Status::Unavailable("IMDS GET " + std::string(path) + " answered HTTP " +
                               std::to_string(resp.status));
  }
  return Status::Unavailable("IMDS refused a fresh token for " + std::string(path) + " (HTTP 401)");
}

}  // namespace sg

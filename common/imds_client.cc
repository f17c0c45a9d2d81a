#include "common/imds_client.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace sg {
namespace {

constexpr std::string_view kTokenHeader = "X-aws-ec2-metadata-token";

Status HttpError(std::string message) {
  return Status::Unavailable(std::move(message)).WithReason(std::string(kImdsHttpError));
}

}  // namespace

ImdsClient::ImdsClient(HttpTransport& transport, Clock& clock, Options options,
                       UniformRandom random)
    : transport_(transport),
      clock_(clock),
      options_(std::move(options)),
      random_(std::move(random)) {}

StatusOr<HttpResponse> ImdsClient::Send(const HttpRequest& request, std::string_view what) {
  RetryPolicy policy;
  policy.base_delay = options_.base_delay;
  policy.max_delay = options_.max_delay;
  const int attempts = std::max(1, options_.max_attempts);
  Status last;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (attempt > 1) clock_.SleepFor(BackoffDelay(policy, attempt - 1, random_));
    auto resp = transport_.Send(request);
    if (resp.ok()) return resp;
    last = resp.status();
  }
  return Status::Unavailable("no answer from the instance metadata service at " +
                             options_.endpoint + " to " + std::string(what) + " after " +
                             std::to_string(attempts) +
                             (attempts == 1 ? " attempt: " : " attempts: ") + last.message())
      .WithReason(std::string(kImdsNoAnswer));
}

StatusOr<std::string> ImdsClient::Token(bool force_new) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = clock_.Monotonic();
  if (!force_new && !token_.empty() && now + options_.refresh_margin < token_expiry_) {
    return token_;
  }
  token_.clear();
  HttpRequest req;
  req.method = "PUT";
  req.url = options_.endpoint + "/latest/api/token";
  req.headers = {
      {"X-aws-ec2-metadata-token-ttl-seconds", std::to_string(options_.token_ttl.count())}};
  req.timeout = options_.timeout;
  req.connect_timeout = options_.timeout;
  req.no_proxy = true;
  SG_ASSIGN_OR_RETURN(HttpResponse resp, Send(req, "the token request"));
  if (resp.status != 200 || resp.body.empty()) {
    std::string hint;
    if (resp.status == 400) hint = " (the token TTL was refused)";
    if (resp.status == 403) hint = " (a proxy in between, or IMDS tokens switched off?)";
    return HttpError("IMDS token request to " + options_.endpoint + " answered HTTP " +
                     std::to_string(resp.status) + hint);
  }
  token_ = resp.body;
  token_expiry_ = now + options_.token_ttl;
  return token_;
}

StatusOr<std::string> ImdsClient::Get(std::string_view path) {
  if (options_.disabled) {
    return Status::Unavailable(
               "the instance metadata service is disabled "
               "(AWS_EC2_METADATA_DISABLED=true)")
        .WithReason(std::string(kImdsDisabled));
  }
  const std::string what = "GET " + std::string(path);
  for (int attempt = 0; attempt < 2; ++attempt) {
    SG_ASSIGN_OR_RETURN(std::string token, Token(/*force_new=*/attempt > 0));
    HttpRequest req;
    req.url = options_.endpoint + "/latest/" + std::string(path);
    // Exactly one token header: a renewed token replaces the old one.
    req.headers = {{std::string(kTokenHeader), token}};
    req.timeout = options_.timeout;
    req.connect_timeout = options_.timeout;
    req.no_proxy = true;
    SG_ASSIGN_OR_RETURN(HttpResponse resp, Send(req, what));
    if (resp.status == 200) return std::move(resp.body);
    if (resp.status == 404) return Status::NotFound("IMDS has no " + std::string(path));
    if (resp.status == 401) continue;  // token expired or revoked: take a new one once
    return HttpError("IMDS " + what + " answered HTTP " + std::to_string(resp.status));
  }
  return HttpError("IMDS refused a fresh token for " + std::string(path) + " (HTTP 401)");
}

ImdsClient::Options ImdsOptionsFromEnvironment(std::string_view configured,
                                               const std::map<std::string, std::string>& env) {
  ImdsClient::Options o;
  std::string endpoint(configured);
  if (endpoint.empty()) endpoint = EnvOr(env, "AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (endpoint.empty()) endpoint = kDefaultImdsEndpoint;
  while (endpoint.size() > 1 && endpoint.back() == '/') endpoint.pop_back();
  o.endpoint = endpoint;
  o.disabled = ToLower(Trim(EnvOr(env, "AWS_EC2_METADATA_DISABLED"))) == "true";
  return o;
}

StatusOr<InstanceIdentity> ParseIdentityDocument(std::string_view body) {
  const auto doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    return Status::Corruption("the instance identity document is not a JSON object: \"" +
                              PrintableExcerpt(body) + "\"");
  }
  InstanceIdentity id;
  const std::pair<const char*, std::string*> fields[] = {
      {"instanceId", &id.instance_id},
      {"region", &id.region},
      {"availabilityZone", &id.availability_zone},
      {"instanceType", &id.instance_type}};
  for (const auto& [name, out] : fields) {
    auto it = doc.find(name);
    if (it == doc.end() || !it->is_string() || it->get<std::string>().empty()) {
      return Status::Corruption(std::string("the instance identity document has no \"") + name +
                                "\" string");
    }
    *out = it->get<std::string>();
  }
  return id;
}

StatusOr<InstanceIdentity> ReadInstanceIdentity(MetadataService& imds) {
  SG_ASSIGN_OR_RETURN(std::string body, imds.Get("dynamic/instance-identity/document"));
  SG_ASSIGN_OR_RETURN(InstanceIdentity id, ParseIdentityDocument(body));
  auto life_cycle = imds.Get("meta-data/instance-life-cycle");
  if (life_cycle.ok()) {
    id.life_cycle = std::string(Trim(*life_cycle));
  } else if (!life_cycle.status().Is(StatusCode::kNotFound)) {
    return life_cycle.status();
  }
  return id;
}

std::string PrintableExcerpt(std::string_view bytes, size_t max_chars) {
  std::string out;
  for (unsigned char c : bytes) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

}  // namespace sg

// libFuzzer target: the IMDS body parsers. The input is cut at NUL bytes into
// the bodies of the spot instance-action, the ASG target lifecycle state, the
// rebalance recommendation, the scheduled events, the identity document, the
// instance-role credentials and a scheduled-event time; an absent part is a
// 404. The interruption monitor polls them twice (the second poll must not
// report anything again) and every event is described and dumped.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/run/interruption_monitor.h"
#include "common/aws_credentials.h"
#include "common/imds_client.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/support/fake_clock.h"

namespace {

class BodiesService final : public sg::MetadataService {
 public:
  std::map<std::string, std::string, std::less<>> bodies;
  sg::StatusOr<std::string> Get(std::string_view path) override {
    auto it = bodies.find(path);
    if (it == bodies.end()) return sg::Status::NotFound("404");
    return it->second;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t start = 0;
  while (parts.size() < 7) {
    const size_t nul = input.find('\0', start);
    parts.emplace_back(input.substr(start, nul == std::string_view::npos ? nul : nul - start));
    if (nul == std::string_view::npos) break;
    start = nul + 1;
  }

  BodiesService imds;
  const std::string_view paths[] = {
      sg::InterruptionMonitor::kNoticePath, sg::InterruptionMonitor::kLifecyclePath,
      sg::InterruptionMonitor::kRebalancePath, sg::InterruptionMonitor::kScheduledPath};
  for (size_t i = 0; i < 4 && i < parts.size(); ++i) imds.bodies[std::string(paths[i])] = parts[i];

  sg::testing::FakeClock clock;
  sg::InterruptionMonitor::Options options;
  options.warn = [](std::string_view) {};
  options.info = [](std::string_view) {};
  sg::InterruptionMonitor monitor(imds, clock, options);
  for (const sg::InterruptionEvent& e : monitor.PollOnce()) {
    (void)e.Describe();
    (void)e.ToJson().dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  // The same bodies again: every event was reported already.
  SG_FUZZ_CHECK(monitor.PollOnce().empty(), "an event was reported twice");

  if (parts.size() > 4) {
    auto id = sg::ParseIdentityDocument(parts[4]);
    if (id.ok()) {
      SG_FUZZ_CHECK(!id->instance_id.empty() && !id->region.empty(),
                    "an identity document without instance id or region was accepted");
    }
  }
  if (parts.size() > 5) {
    auto creds = sg::ParseCredentialsJson(parts[5], "fuzz");
    // An error may name what is wrong, but never quotes the secret key.
    const auto j = nlohmann::json::parse(parts[5], nullptr, /*allow_exceptions=*/false);
    if (!creds.ok() && j.is_object() && j.contains("SecretAccessKey") &&
        j["SecretAccessKey"].is_string()) {
      const std::string secret = j["SecretAccessKey"].get<std::string>();
      if (secret.size() >= 8) {
        SG_FUZZ_CHECK(creds.status().message().find(secret) == std::string::npos,
                      "a credentials error quotes the secret key");
      }
    }
  }
  if (parts.size() > 6) (void)sg::ParseImdsEventTime(parts[6]);
  return 0;
}

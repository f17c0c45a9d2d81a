// Which child of a sweep, and which attempt of it, a batch engine runs
// (docs/agent.md, "Running under AWS Batch, Kubernetes or ECS"): AWS Batch
// array jobs and Kubernetes Indexed Jobs give each child an index, and AWS
// Batch numbers its attempts. `{index}` in `job`, `command` and `resume_args`
// is replaced by the index (agent/config/placeholders.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sg {

// The variables, in the order they are looked at.
inline constexpr const char* kArrayIndexVar = "AWS_BATCH_JOB_ARRAY_INDEX";
inline constexpr const char* kCompletionIndexVar = "JOB_COMPLETION_INDEX";
inline constexpr const char* kAttemptVar = "AWS_BATCH_JOB_ATTEMPT";

struct EngineIdentity {
  std::optional<int64_t> index;    // the array or completion index
  std::string index_var;           // the variable it came from; "" without one
  std::optional<int64_t> attempt;  // AWS_BATCH_JOB_ATTEMPT, 1 for the first
};

struct EngineIdentityResult {
  EngineIdentity identity;
  // One message per variable that is set but malformed, naming it.
  std::vector<std::string> problems;
};

// Reads the index from AWS_BATCH_JOB_ARRAY_INDEX, or else from
// JOB_COMPLETION_INDEX (a whole number >= 0), and the attempt from
// AWS_BATCH_JOB_ATTEMPT (a whole number >= 1). An empty variable counts as
// unset.
EngineIdentityResult ReadEngineIdentity(const std::map<std::string, std::string>& env);

// The refusal when `{index}` is used and no variable gives it.
std::string NoIndexMessage();

}  // namespace sg

// A checkpoint writer script (tests/tools/writers/*.py) running in the
// background, steered through its hold points.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {

class WriterProcess {
 public:
  // Starts `python3 -B tests/tools/writers/<script> <args> --control ... --hold H...`.
  WriterProcess(const std::string& script, const std::vector<std::string>& args,
                const std::vector<std::string>& holds = {});

  // Waits until the writer stands at `hold`; fails the test (and returns
  // false) when it exits or does not get there in time.
  bool WaitAt(const std::string& hold, std::chrono::seconds timeout = std::chrono::seconds(30));
  void Release(const std::string& hold);
  // Waits for the writer to finish; false (test failed) unless it finished
  // every step.
  bool WaitDone(std::chrono::seconds timeout = std::chrono::seconds(60));

 private:
  TempDir control_;
  std::optional<BackgroundProcess> process_;
  std::string script_;
};

// The same script run to completion; fails the test unless it exits 0.
void RunWriter(const std::string& script, const std::vector<std::string>& args);

}  // namespace sg::testing

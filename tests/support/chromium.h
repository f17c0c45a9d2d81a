// Debian's headless chromium for the tests of `spotguard report --html`'s
// page: the DOM after the page's scripts ran, what it logged, and a
// screenshot (docs/testing.md, "The report page").
#pragma once

#include <chrono>
#include <string>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {

inline bool Installed(const std::string& tool) {
  return RunCommand({"/bin/sh", "-c", "command -v " + tool}).exit_code == 0;
}

inline std::vector<std::string> ChromiumArgs(const TempDir& dir) {
  return {"chromium",         "--headless",
          "--no-sandbox",     "--disable-gpu",
          "--user-data-dir=" + dir.Join("chromium"), "--enable-logging=stderr",
          "--v=0"};
}

// Chromium's DOM after the page's scripts ran (out), and what it logged (err).
inline CommandResult DumpDom(const TempDir& dir, const std::string& page) {
  std::vector<std::string> args = ChromiumArgs(dir);
  args.insert(args.end(), {"--dump-dom", "file://" + page});
  return RunCommand(args, {}, std::chrono::seconds(120));
}

// A PNG of the page, 1200 pixels wide.
inline CommandResult Screenshot(const TempDir& dir, const std::string& page,
                                const std::string& png) {
  std::vector<std::string> args = ChromiumArgs(dir);
  args.insert(args.end(), {"--hide-scrollbars", "--window-size=1200,900", "--screenshot=" + png,
                           "file://" + page});
  return RunCommand(args, {}, std::chrono::seconds(120));
}

// Whether chromium's log shows a script error or a console message.
inline bool ConsoleError(const std::string& log) {
  return log.find("Uncaught") != std::string::npos || log.find(":CONSOLE") != std::string::npos;
}

}  // namespace sg::testing

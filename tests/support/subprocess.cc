#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/files.h"
#include "common/http.h"

extern char** environ;

namespace sg::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> MergedEnv(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) {
    if (v.empty()) {
      merged.erase(k);
    } else {
      merged[k] = v;
    }
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : merged) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// fork + exec with stdin from /dev/null and stdout/stderr to the given files
// (or inherited when empty). The child gets its own process group.
pid_t Spawn(const std::vector<std::string>& argv, std::vector<std::string> env,
            const std::string& out_path, const std::string& err_path) {
  std::vector<std::string> args = argv;
  std::vector<char*> c_args = CStrings(args);
  std::vector<char*> c_env = CStrings(env);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    if (!out_path.empty()) ::dup2(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
    if (!err_path.empty()) ::dup2(::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
    environ = c_env.data();
    ::execvp(c_args[0], c_args.data());
    std::fprintf(stderr, "exec %s: %s\n", c_args[0], std::strerror(errno));
    ::_exit(127);
  }
  return pid;
}

int WaitExitCode(pid_t pid, std::chrono::seconds timeout, bool* timed_out) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  *timed_out = false;
  while (true) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() > deadline) {
      *timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env,
                         std::chrono::seconds timeout) {
  char dir_template[] = "/tmp/spotguard-run-XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  const std::string out_path = dir + "/out", err_path = dir + "/err";
  const pid_t pid = Spawn(argv, MergedEnv(env), out_path, err_path);
  bool timed_out = false;
  CommandResult result;
  result.exit_code = WaitExitCode(pid, timeout, &timed_out);
  result.out = Slurp(out_path);
  result.err = Slurp(err_path);
  std::filesystem::remove_all(dir);
  if (timed_out) ADD_FAILURE() << argv[0] << " did not finish within " << timeout.count() << "s";
  return result;
}

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& argv) {
  pid_ = Spawn(argv, MergedEnv({}), "", "");
}

bool BackgroundProcess::running() {
  int status;
  return pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == 0;
}

BackgroundProcess::~BackgroundProcess() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGTERM);
  bool timed_out = false;
  WaitExitCode(pid_, std::chrono::seconds(5), &timed_out);
}

namespace {

// Starts tests/tools/<script> --port 0 --port-file F and returns its endpoint
// once it has written the port ("" when it did not start within 20 s).
std::string StartToolServer(const std::string& script, const std::vector<std::string>& extra_args,
                            std::optional<BackgroundProcess>& process) {
  const std::string port_file =
      std::filesystem::temp_directory_path() / ("tool-port-" + RandomHex());
  std::vector<std::string> argv = {SPOTGUARD_PYTHON, SPOTGUARD_SOURCE_DIR "/tests/tools/" + script,
                                   "--port",         "0",
                                   "--port-file",    port_file};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  process.emplace(argv);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    std::string port = Slurp(port_file);
    if (!port.empty()) {
      while (!port.empty() && (port.back() == '\n' || port.back() == ' ')) port.pop_back();
      std::filesystem::remove(port_file);
      return "http://127.0.0.1:" + port;
    }
    if (!process->running()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

std::string ControlRequest(const std::string& endpoint, const std::string& method,
                           const std::string& path, const std::string& body) {
  static CurlTransport transport;
  HttpRequest req;
  req.method = method;
  req.url = endpoint + path;
  req.body = body;
  if (!body.empty()) req.headers = {{"Content-Type", "application/json"}};
  auto resp = transport.Send(req);
  if (!resp.ok()) {
    ADD_FAILURE() << "control " << path << ": " << resp.status().ToString();
    return "";
  }
  if (resp->status != 200)
    ADD_FAILURE() << "control " << path << " -> " << resp->status << " " << resp->body;
  return resp->body;
}

}  // namespace

ImdsSimulator::ImdsSimulator(const std::vector<std::string>& extra_args) {
  endpoint_ = StartToolServer("imds_sim.py", extra_args, process_);
  if (endpoint_.empty()) ADD_FAILURE() << "the IMDS simulator did not start";
}

std::string ImdsSimulator::Control(const std::string& method, const std::string& path,
                                   const std::string& body) {
  return ControlRequest(endpoint_, method, path, body);
}

ToolServer::ToolServer(const std::string& script, const std::vector<std::string>& extra_args) {
  endpoint_ = StartToolServer(script, extra_args, process_);
  if (endpoint_.empty()) ADD_FAILURE() << script << " did not start";
}

std::string ToolServer::Control(const std::string& method, const std::string& path,
                                const std::string& body) {
  return ControlRequest(endpoint_, method, path, body);
}

}  // namespace sg::testing

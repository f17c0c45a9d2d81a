// `spotguard doctor` through the binary: a file:// store, the IMDS simulator,
// a closed metadata port, AWS_EC2_METADATA_DISABLED and a store that cannot
// be opened.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

// Nothing answers on port 1 of the loopback address: "not on EC2".
constexpr char kClosedEndpoint[] = "http://127.0.0.1:1";

class DoctorCli : public ::testing::Test {
 protected:
  CommandResult Doctor(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), {SPOTGUARD_BIN, "doctor"});
    std::map<std::string, std::string> full = {{"SPOTGUARD_CONFIG", ""},
                                               {"SPOTGUARD_JOB", ""},
                                               {"SPOTGUARD_STORE", ""},
                                               {"SPOTGUARD_IMDS_ENDPOINT", ""},
                                               {"AWS_EC2_METADATA_SERVICE_ENDPOINT", ""},
                                               {"AWS_EC2_METADATA_DISABLED", ""}};
    for (auto& [k, v] : env) full[k] = v;
    return RunCommand(args, full);
  }
  std::vector<std::string> FileStoreArgs(const std::string& imds) {
    return {"--job",
            "j",
            "--store",
            "file://" + dir_.Join("store"),
            "--checkpoint-dir",
            dir_.Join("ckpt"),
            "--imds-endpoint",
            imds};
  }
  // The line of one check, "" when absent.
  static std::string LineOf(const std::string& out, const std::string& check) {
    for (const std::string& line : Split(out, '\n')) {
      if (line.size() > 6 && line.substr(6).starts_with(check + ": ")) return line;
    }
    return "";
  }
  // Regular files left below `root`.
  static int FilesBelow(const std::string& root) {
    int n = 0;
    std::error_code ec;
    if (!std::filesystem::exists(root, ec)) return 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
      if (e.is_regular_file()) ++n;
    }
    return n;
  }

  TempDir dir_;
};

TEST_F(DoctorCli, AFileStoreIsAllOkOffEc2ExceptAnImdsWarning) {
  auto r = Doctor(FileStoreArgs(kClosedEndpoint));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LineOf(r.out, "credentials"), "ok    credentials: not needed for a file:// store")
      << r.out;
  for (const char* check : {"store", "write", "create-only", "if-match", "clock"}) {
    EXPECT_TRUE(LineOf(r.out, check).starts_with("ok    ")) << check << "\n" << r.out;
  }
  const std::string imds = LineOf(r.out, "imds");
  EXPECT_TRUE(
      imds.starts_with("warn  imds: no answer at http://127.0.0.1:1: not on EC2 or IMDS "
                       "disabled"))
      << r.out;
  // The disk has tens of GiB free here; the line names the dir.
  EXPECT_NE(LineOf(r.out, "disk").find(dir_.Join("ckpt")), std::string::npos) << r.out;
  EXPECT_FALSE(LineOf(r.out, "disk").starts_with("FAIL")) << r.out;
  EXPECT_NE(r.out.find("doctor: "), std::string::npos);
  EXPECT_NE(r.out.find(" 0 FAIL"), std::string::npos) << r.out;
  EXPECT_EQ(FilesBelow(dir_.Join("store/j/.doctor")), 0);
}

TEST_F(DoctorCli, WithTheImdsSimulatorImdsIsOk) {
  ImdsSimulator sim;
  auto r = Doctor(FileStoreArgs(sim.endpoint()));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string imds = LineOf(r.out, "imds");
  EXPECT_TRUE(imds.starts_with("ok    imds: IMDSv2 at " + sim.endpoint() + ": instance i-"))
      << r.out;
  auto requests = nlohmann::json::parse(sim.Control("GET", "/_sim/requests"));
  bool token_put = false;
  for (const auto& q : requests) {
    if (q["method"] == "PUT" && q["path"] == "/latest/api/token") token_put = true;
  }
  EXPECT_TRUE(token_put) << requests.dump();
}

TEST_F(DoctorCli, ABrokenMetadataServiceFails) {
  ImdsSimulator sim;
  sim.Control("POST", "/_sim/fault",
              R"({"path": "/latest/dynamic/instance-identity/document", "status": 500,
                  "count": -1})");
  auto r = Doctor(FileStoreArgs(sim.endpoint()));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(LineOf(r.out, "imds").starts_with("FAIL  imds: IMDSv2 token from")) << r.out;
}

TEST_F(DoctorCli, MetadataDisabledIsAWarningAndSendsNothing) {
  ImdsSimulator sim;
  auto r = Doctor(FileStoreArgs(sim.endpoint()), {{"AWS_EC2_METADATA_DISABLED", "true"}});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(LineOf(r.out, "imds").starts_with("warn  imds: AWS_EC2_METADATA_DISABLED=true"))
      << r.out;
  EXPECT_EQ(nlohmann::json::parse(sim.Control("GET", "/_sim/requests")).size(), 0u);
}

// From a container on a bridge network, a hop limit of 1 drops the token
// PUT's answer while GETs get through: doctor names that cause and the
// launch-template setting that fixes it; with a hop limit of 2 it works.
TEST_F(DoctorCli, AHopLimitOfOneFromAContainerIsNamedWithItsFix) {
  ImdsSimulator sim;
  sim.Control("POST", "/_sim/metadata-options", R"({"hop_limit": 1, "hops": 2})");
  auto r = Doctor(FileStoreArgs(sim.endpoint()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const std::string imds = LineOf(r.out, "imds");
  EXPECT_TRUE(imds.starts_with("warn  imds: the IMDSv2 token request to " + sim.endpoint() +
                               " got no answer, but a GET there answered HTTP 401"))
      << r.out;
  EXPECT_NE(imds.find("hop limit is 1 and this runs in a container"), std::string::npos) << r.out;
  EXPECT_NE(imds.find("HttpPutResponseHopLimit: 2"), std::string::npos) << r.out;

  sim.Control("POST", "/_sim/metadata-options", R"({"hop_limit": 2})");
  auto fixed = Doctor(FileStoreArgs(sim.endpoint()));
  EXPECT_TRUE(LineOf(fixed.out, "imds").starts_with("ok    imds: IMDSv2 at ")) << fixed.out;
}

TEST_F(DoctorCli, MetadataTurnedOffForTheInstanceNamesHttpEndpoint) {
  ImdsSimulator sim;
  sim.Control("POST", "/_sim/metadata-options", R"({"http_endpoint": "disabled"})");
  auto r = Doctor(FileStoreArgs(sim.endpoint()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const std::string imds = LineOf(r.out, "imds");
  EXPECT_TRUE(imds.starts_with("warn  imds: " + sim.endpoint() + " answered 403")) << r.out;
  EXPECT_NE(imds.find("HttpEndpoint: enabled"), std::string::npos) << r.out;
}

TEST_F(DoctorCli, AStoreThatCannotBeOpenedFailsEveryStoreCheckButRunsTheRest) {
  auto r = Doctor({"--job", "j", "--store", "file:///dev/null/store", "--checkpoint-dir",
                   dir_.Join("ckpt"), "--imds-endpoint", kClosedEndpoint});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  for (const char* check : {"store", "write", "create-only", "if-match", "clock"}) {
    EXPECT_TRUE(LineOf(r.out, check).starts_with("FAIL  ")) << check << "\n" << r.out;
  }
  EXPECT_TRUE(LineOf(r.out, "imds").starts_with("warn  ")) << r.out;
  EXPECT_FALSE(LineOf(r.out, "disk").empty()) << r.out;
  EXPECT_NE(r.out.find(" 5 FAIL"), std::string::npos) << r.out;
}

TEST_F(DoctorCli, WithoutACheckpointDirTheDiskCheckWarns) {
  auto r = Doctor({"--store", "file://" + dir_.Join("store"), "--imds-endpoint", kClosedEndpoint},
                  {{"SPOTGUARD_CHECKPOINT_DIR", ""}});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(LineOf(r.out, "disk").starts_with("warn  disk: checkpoint_dir is not set")) << r.out;
  // Without a job the probes go under .doctor/ at the store's root, and are removed.
  EXPECT_TRUE(LineOf(r.out, "create-only").starts_with("ok    ")) << r.out;
  EXPECT_EQ(FilesBelow(dir_.Join("store/.doctor")), 0);
}

}  // namespace
}  // namespace sg::testing

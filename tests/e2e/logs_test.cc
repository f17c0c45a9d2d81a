// Logs that outlive the instance (docs/design.md §13): the real binary, the
// example trainer, the Ceph gateway and the IMDS simulator. A trainer
// interrupted by a notice has its last lines, those printed after the
// checkpoint request included, in the store once the agent has exited 75;
// `spotguard logs` reads them from another directory while another agent on
// another instance runs the job. And `logs` and `gc` on a file:// store.
#include <nlohmann/json.hpp>

#include "agent/logs/log_shipper.h"
#include "agent/repo/store_layout.h"
#include "common/file_store.h"
#include "common/log_lines.h"
#include "common/log_segments.h"
#include "tests/e2e/agent_e2e_fixture.h"

namespace sg::testing {
namespace {

class LogsE2E : public AgentE2E {
 protected:
  // `spotguard logs ARGS` (or another subcommand) run from `cwd`, with the
  // store's credentials.
  CommandResult Logs(const std::string& cwd, const std::string& config,
                     const std::vector<std::string>& args, const std::string& sub = "logs") {
    std::string cmd =
        "cd '" + cwd + "' && exec '" SPOTGUARD_BIN "' " + sub + " -c '" + config + "'";
    for (const std::string& a : args) cmd += " '" + a + "'";
    return RunCommand({"/bin/sh", "-c", cmd}, {{"AWS_ACCESS_KEY_ID", s3_.access_key},
                                               {"AWS_SECRET_ACCESS_KEY", s3_.secret_key},
                                               {"SPOTGUARD_CONFIG", ""},
                                               {"AWS_EC2_METADATA_DISABLED", "true"}});
  }
};

// Position of the first line at or after `from` that contains all of `parts`.
size_t FindLine(const std::string& text, const std::vector<std::string>& parts, size_t from = 0) {
  size_t start = from;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    bool all = true;
    for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
    if (all) return start;
    start = end + 1;
  }
  return std::string::npos;
}

TEST_F(LogsE2E, TheInterruptedTrainersLastLinesAreReadableFromAnotherMachine) {
  imds_.Control("POST", "/_sim/identity", R"({"instanceId": "i-first"})");
  // Saves on SIGUSR1 (the checkpoint request) and again on SIGTERM (the
  // stop that follows the final commit); prints a line each time.
  const std::string config =
      WriteConfig("a", {"--steps", "100000", "--save-on-sigterm"}, {{"log_ship_interval", "1s"}});
  auto a = StartAgent("a", config, "ckpt-a", imds_);
  ASSERT_TRUE(WaitFor([&] { return !Committed().empty(); }, 30s)) << a->Output();
  imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 60})");
  const auto code = a->Wait(120s);
  ASSERT_TRUE(code.has_value()) << a->Output();
  ASSERT_EQ(*code, 75) << a->Output();
  ASSERT_NE(a->Output().find("saved on SIGTERM"), std::string::npos) << a->Output();
  // The trainer's lines still reach the agent's stderr (the journal).
  EXPECT_NE(a->Output().find("] saved on SIGTERM"), std::string::npos) << a->Output();

  // Another instance takes the job over.
  ImdsSimulator imds_b;
  imds_b.Control("POST", "/_sim/identity", R"({"instanceId": "i-second"})");
  const std::string config_b = WriteConfig("b", {"--steps", "100000"});
  auto b = StartAgent("b", config_b, "ckpt-b", imds_b);
  ASSERT_TRUE(b->WaitForOutput("started the trainer", 60s)) << b->Output();

  // A third directory, with a config that names only the job and the store.
  const std::string elsewhere = dir_.Join("laptop");
  std::filesystem::create_directories(elsewhere);
  const std::string reader = dir_.WriteFile(
      "laptop/reader.json", nlohmann::json{{"job", "job"},
                                           {"store", "s3://" + s3_.bucket + "/" + prefix_},
                                           {"endpoint", s3_.endpoint}}
                                .dump());
  const CommandResult r = Logs(elsewhere, reader, {"--instance", "i-first"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string& out = r.out;
  // In order: the agent asks for a checkpoint, the trainer answers it, the
  // agent commits it and stops the trainer, which prints its last line.
  const size_t asked = FindLine(out, {" agent ", "asking the trainer for a checkpoint"});
  ASSERT_NE(asked, std::string::npos) << out;
  const size_t answered = FindLine(out, {" trainer.out checkpoint "}, asked);
  ASSERT_NE(answered, std::string::npos) << out;
  const size_t last = FindLine(out, {" trainer.out saved on SIGTERM"}, answered);
  EXPECT_NE(last, std::string::npos) << out;
  EXPECT_NE(FindLine(out, {" agent ", "the trainer stopped"}, answered), std::string::npos) << out;
  // Every line names attempt 1 (the first agent's lease generation).
  EXPECT_EQ(out.find(" #2 "), std::string::npos) << out;
  EXPECT_NE(out.find(" #1 "), std::string::npos) << out;

  // The same as JSON, and by attempt number.
  const CommandResult j = Logs(elsewhere, reader, {"--attempt", "1", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  bool saw_last = false;
  size_t start = 0;
  while (start < j.out.size()) {
    const size_t end = j.out.find('\n', start);
    auto line = nlohmann::json::parse(j.out.substr(start, end - start));
    EXPECT_EQ(line["attempt"], 1);
    EXPECT_EQ(line["instance"], "i-first");
    saw_last |= line["source"] == "trainer.out" && line["text"] == "saved on SIGTERM";
    start = end + 1;
  }
  EXPECT_TRUE(saw_last) << j.out;

  // --follow prints what is there and goes on looking for more.
  AgentProcess follow({"logs", "-c", reader, "--attempt", "1", "--follow"},
                      {{"AWS_ACCESS_KEY_ID", s3_.access_key},
                       {"AWS_SECRET_ACCESS_KEY", s3_.secret_key},
                       {"SPOTGUARD_CONFIG", ""},
                       {"AWS_EC2_METADATA_DISABLED", "true"}},
                      dir_.Join("follow.log"));
  EXPECT_TRUE(follow.WaitForOutput("trainer.out saved on SIGTERM", 60s)) << follow.Output();
  EXPECT_FALSE(follow.Wait(0ms).has_value()) << follow.Output();  // still following

  // `status` names the newest segment.
  const CommandResult st = Logs(elsewhere, reader, {}, "status");
  ASSERT_EQ(st.exit_code, 0) << st.err;
  EXPECT_NE(st.out.find("logs: newest segment job/logs/i-"), std::string::npos) << st.out;

  // An attempt with nothing shipped is said so, exit 3; a bad one is a usage error.
  EXPECT_EQ(Logs(elsewhere, reader, {"--attempt", "99"}).exit_code, 3);
  EXPECT_EQ(Logs(elsewhere, reader, {"--attempt", "first"}).exit_code, 2);
  EXPECT_EQ(Logs(elsewhere, reader, {"--since", "soon"}).exit_code, 2);
}

}  // namespace
}  // namespace sg::testing

namespace sg::testing {
namespace {

// `spotguard logs` and `gc` through the binary on a file:// store whose
// segments the test ships itself (agent/logs/log_shipper.h).
class LogsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = FileStore::Open(dir_.Join("store"));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  // Ships one segment of `lines` for attempt `generation` on `instance`.
  void Ship(const std::string& instance, uint64_t generation,
            const std::vector<std::string>& lines) {
    LogSegmentOptions o;
    o.dir = dir_.Join("local-" + instance + "-" + std::to_string(generation));
    auto segments = LogSegments::Open(o);
    ASSERT_TRUE(segments.ok());
    for (const std::string& l : lines) (*segments)->Append(l);
    LogShipper shipper(*store_, **segments, "e2e", instance);
    ASSERT_EQ(shipper.Ship(generation).shipped, 1);
  }
  CommandResult Run(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    env["SPOTGUARD_JOB"] = "e2e";
    env["SPOTGUARD_STORE"] = "file://" + dir_.Join("store");
    env["SPOTGUARD_CONFIG"] = "";
    args.insert(args.begin(), SPOTGUARD_BIN);
    return RunCommand(args, env);
  }
  TempDir dir_;
  std::unique_ptr<FileStore> store_;
};

TEST_F(LogsCli, PrintsTheNewestAttemptByDefaultAndGcKeepsLogsKeepAttempts) {
  const std::string old_time = "2020-01-01T00:00:00.000Z";
  const std::string now = FormatUtc(SystemClock().Now(), true);
  Ship("i-a", 1, {FormatLogLine(old_time, "trainer.out", "first attempt")});
  Ship("i-b", 2,
       {FormatLogLine(old_time, "trainer.out", "an old line"),
        FormatLogLine(now, "trainer.err", EscapeLogText("bad \x01 byte")),
        FormatLogLine(now, "agent", "info exiting 75")});
  auto r = Run({"logs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, old_time + " #2 trainer.out an old line\n" + now +
                       " #2 trainer.err bad \\x01 byte\n" + now + " #2 agent info exiting 75\n");
  r = Run({"logs", "--since", "1h"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("an old line"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exiting 75"), std::string::npos) << r.out;
  r = Run({"logs", "--instance", "i-a"});
  EXPECT_EQ(r.out, old_time + " #1 trainer.out first attempt\n");

  // A damaged segment is skipped and named; the others are still printed.
  const std::string damaged = LogSegmentKey("e2e", {"i-b", 2, 0, "20200101T000000.000Z"});
  ASSERT_TRUE(store_->Put(damaged, "not zstd", PutCondition::None()).ok());
  r = Run({"logs"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("skipped " + damaged), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("exiting 75"), std::string::npos) << r.out;
  ASSERT_TRUE(store_->Delete(damaged).ok());

  r = Run({"gc"}, {{"SPOTGUARD_LOGS_KEEP", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("removed the logs of 1 old attempts (1 segments)"), std::string::npos)
      << r.out;
  EXPECT_EQ(Run({"logs", "--attempt", "1"}).exit_code, 3);
  EXPECT_EQ(Run({"logs", "--attempt", "2"}).exit_code, 0);
}

// A segment someone crafted (it did not come through the capture, which
// escapes) cannot set the terminal's title or clear its screen: `logs`
// prints control bytes escaped, to a terminal or a pipe alike.
TEST_F(LogsCli, ControlBytesStoredInASegmentArePrintedEscaped) {
  const std::string t = "2026-11-22T08:22:00.000Z";
  Ship("i-a", 1,
       {t + " trainer.out \x1b]0;pwned\x07title\n", t + " trainer.out \x1b[2J\x1b[Hcleared\n",
        t + " agent\x1b[31m info \xc2\x9b" + "2Jc1\n"});
  auto r = Run({"logs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x07'), std::string::npos) << r.out;
  EXPECT_EQ(r.out, t + " #1 trainer.out \\x1b]0;pwned\\x07title\n" + t +
                       " #1 trainer.out \\x1b[2J\\x1b[Hcleared\n" + t +
                       " #1 agent\\x1b[31m info \\xc2\\x9b2Jc1\n");
}

}  // namespace
}  // namespace sg::testing

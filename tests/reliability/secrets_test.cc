// No credential in any output: every subcommand runs with known credentials
// at the most verbose log level, from each place credentials come from
// (environment, shared credentials file, the instance role through IMDS),
// and neither the secret key nor the session token may appear in what it
// prints, in the files it writes or in the objects it stores. And TLS: an
// https endpoint whose certificate no trusted CA signed is refused, and
// AWS_CA_BUNDLE makes the same endpoint work; there is no switch to turn
// verification off.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/files.h"
#include "common/zstd_codec.h"
#include "tests/support/reliability_record.h"
#include "tests/support/s3_test_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;

// Every object in `store`, all pages.
std::vector<ObjectInfo> AllObjects(ObjectStore& store) {
  std::vector<ObjectInfo> all;
  std::string token;
  do {
    auto page = store.List("", token);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) break;
    all.insert(all.end(), page->objects.begin(), page->objects.end());
    token = page->next_token;
  } while (!token.empty());
  return all;
}

void DeleteAll(ObjectStore& store) {
  for (const auto& o : AllObjects(store)) (void)store.Delete(o.key);
}

// Every occurrence of any of `needles` in `haystack`, described for a failure message.
std::vector<std::string> Leaks(const std::string& where, const std::string& haystack,
                               const std::vector<std::string>& needles) {
  std::vector<std::string> found;
  for (const auto& n : needles) {
    if (haystack.find(n) != std::string::npos) found.push_back(where + " contains " + n);
  }
  return found;
}

class Secrets : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(LoadS3TestEnv(&s3_));
    ASSERT_FALSE(imds_.endpoint().empty());
    prefix_ = "secrets-tests/" + RandomHex(6);
    // A token nobody could print by accident; the gateway ignores it (it has
    // no STS), so the commands still work while the client sends it.
    token_ = "SGTESTSESSIONTOKEN" + RandomHex(24);
    needles_ = {s3_.secret_key, token_};
    imds_.Control("POST", "/_sim/credentials",
                  nlohmann::json{{"role", "spotguard-test-role"},
                                 {"AccessKeyId", s3_.access_key},
                                 {"SecretAccessKey", s3_.secret_key},
                                 {"Token", token_}}
                      .dump());
    ASSERT_TRUE(std::filesystem::create_directories(dir_.Join("ckpt")));
    for (int step : {10, 20}) {
      dir_.WriteFile("ckpt/step_" + std::to_string(step) + ".ckpt",
                     "weights of step " + std::to_string(step) + "\n" + std::string(4096, 'w'));
    }
  }

  void TearDown() override {
    if (store_ != nullptr) DeleteAll(*store_);
  }

  std::string WriteConfig(const std::string& name, const std::string& log_format) {
    nlohmann::json command = {SPOTGUARD_PYTHON,
                              SPOTGUARD_SOURCE_DIR "/examples/simple_trainer.py",
                              "--out",
                              "{checkpoint_dir}",
                              "--step-seconds",
                              "0.01",
                              "--checkpoint-every",
                              "10",
                              "--steps",
                              "60"};
    nlohmann::json c = {{"job", "job-" + name},
                        {"store", "s3://" + s3_.bucket + "/" + prefix_},
                        {"endpoint", s3_.endpoint},
                        {"checkpoint_dir", dir_.Join("ckpt")},
                        {"preset", "generic"},
                        {"patterns", {"step_*.ckpt"}},
                        {"settle_time", "100ms"},
                        {"upload_interval", "1s"},
                        {"log_level", "trace"},
                        {"log_format", log_format},
                        {"imds", {{"poll_interval", "200ms"}}},
                        {"command", command},
                        {"resume_args", {"--resume", "{resume}"}}};
    return dir_.WriteFile(name + ".json", c.dump(2));
  }

  // Runs `spotguard args...` with `env`; records every leak in its output.
  CommandResult Run(const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& env) {
    std::vector<std::string> argv = {SPOTGUARD_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunCommand(argv, env, 120s);
    std::string what = "`spotguard";
    for (const auto& a : args) what += " " + a;
    what += "`";
    for (auto& l : Leaks(what + " stdout", r.out, needles_)) leaks_.push_back(l);
    for (auto& l : Leaks(what + " stderr", r.err, needles_)) leaks_.push_back(l);
    ++commands_run_;
    output_bytes_ += r.out.size() + r.err.size();
    return r;
  }

  // Every subcommand, with the credentials `env` provides.
  void RunEverything(const std::string& name, const std::string& log_format,
                     std::map<std::string, std::string> env) {
    store_ = OpenTestS3Store(s3_, prefix_);
    ASSERT_NE(store_, nullptr);
    env["SPOTGUARD_CONFIG"] = "";
    env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = imds_.endpoint();
    const std::string config = WriteConfig(name, log_format);
    const std::vector<std::string> common = {"-c", config, "--imds-endpoint", imds_.endpoint()};
    auto with = [&](std::vector<std::string> args) {
      args.insert(args.begin() + 1, common.begin(), common.end());  // before any `--`
      return args;
    };

    auto r = Run(with({"run", "--print-config"}), env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = Run(with({"snapshot"}), env);
    ASSERT_EQ(r.exit_code, 0) << "the credentials from " << name << " must work: " << r.err;
    r = Run(with({"ls"}), env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("20"), std::string::npos) << r.out;
    r = Run(with({"verify"}), env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = Run(with({"restore", "--to", dir_.Join("restored-" + name)}), env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = Run(with({"status"}), env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = Run(with({"status", "--json"}), env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = Run(with({"gc"}), env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = Run(with({"doctor"}), env);
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.exit_code << r.err;
    EXPECT_NE(r.out.find("credentials"), std::string::npos) << r.out;
    // A trainer that finishes: restore, supervise, upload, completion.
    r = Run(with({"run", "--job", "run-" + name, "--checkpoint-dir", dir_.Join("run-" + name)}), env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // An interruption notice for watch and drill to see.
    imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 100})");
    r = Run(with({"watch", "--once"}), env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    imds_.Control("DELETE", "/_sim/spot-notice");
    // The drill's trainer must outlive --after: 400 steps of 10 ms.
    r = Run(with({"drill", "--after", "1500ms", "--job", "drill-" + name, "--checkpoint-dir",
                  dir_.Join("drill-" + name), "--", SPOTGUARD_PYTHON,
                  SPOTGUARD_SOURCE_DIR "/examples/simple_trainer.py", "--out", "{checkpoint_dir}",
                  "--step-seconds", "0.01", "--checkpoint-every", "10", "--steps", "400"}),
            env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // Usage and config errors print what was wrong, never the values of secrets.
    r = Run(with({"snapshot", "--no-such-flag"}), env);
    EXPECT_EQ(r.exit_code, 2);

    // What the commands left on disk and in the store.
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_.path())) {
      if (!e.is_regular_file()) continue;
      const std::string path = e.path().string();
      if (path.ends_with(".json") && e.path().parent_path() == dir_.path()) continue;  // configs
      if (path.ends_with("credentials")) continue;  // the shared credentials file itself
      auto body = ReadFileToString(path);
      ASSERT_TRUE(body.ok());
      for (auto& l : Leaks(path, *body, needles_)) leaks_.push_back(l);
      ++files_scanned_;
    }
    for (const auto& o : AllObjects(*store_)) {
      auto body = static_cast<ObjectStore&>(*store_).Get(o.key);
      ASSERT_TRUE(body.ok()) << o.key;
      if (o.key.ends_with(".log.zst")) {  // a shipped log segment: scan its text
        auto text = DecodeSizedFrame(*body, 1ull << 30);
        ASSERT_TRUE(text.ok()) << o.key << ": " << text.status().ToString();
        body = std::move(text);
      }
      for (auto& l : Leaks("object " + o.key, *body, needles_)) leaks_.push_back(l);
      ++objects_scanned_;
    }
  }

  void Record(const std::string& test, const std::string& source) {
    ReliabilityRecord rec;
    rec.test = test;
    rec.area = "secrets";
    rec.faults = "secret key and session token from " + source + ", log level trace";
    rec.trials = commands_run_;
    rec.faults_injected = 0;
    rec.lost = static_cast<long>(leaks_.size());
    rec.detail = std::to_string(commands_run_) + " commands, " + std::to_string(output_bytes_) +
                 " bytes of output, " + std::to_string(files_scanned_) + " files and " +
                 std::to_string(objects_scanned_) + " stored objects scanned; leaks: " +
                 std::to_string(leaks_.size());
    EXPECT_TRUE(WriteReliabilityRecord(rec));
  }

  void ExpectNoLeaks() {
    for (const auto& l : leaks_) ADD_FAILURE() << l;
    EXPECT_GE(commands_run_, 12);
    EXPECT_GT(output_bytes_, 1000u) << "trace logging printed next to nothing: the scan proves little";
    EXPECT_GT(objects_scanned_, 3);
  }

  S3TestEnv s3_;
  ImdsSimulator imds_;
  TempDir dir_;
  std::string prefix_, token_;
  std::vector<std::string> needles_;
  std::unique_ptr<S3Store> store_;
  std::vector<std::string> leaks_;
  int commands_run_ = 0, files_scanned_ = 0, objects_scanned_ = 0;
  size_t output_bytes_ = 0;
};

TEST_F(Secrets, NoCommandPrintsOrStoresCredentialsFromTheEnvironment) {
  RunEverything("env", "text",
                {{"AWS_ACCESS_KEY_ID", s3_.access_key},
                 {"AWS_SECRET_ACCESS_KEY", s3_.secret_key},
                 {"AWS_SESSION_TOKEN", token_}});
  ExpectNoLeaks();
  Record("secrets_env_credentials", "the environment");
}

TEST_F(Secrets, NoCommandPrintsOrStoresCredentialsFromTheSharedFile) {
  const std::string file = dir_.WriteFile("credentials", "[default]\naws_access_key_id = " +
                                                             s3_.access_key +
                                                             "\naws_secret_access_key = " +
                                                             s3_.secret_key +
                                                             "\naws_session_token = " + token_ + "\n");
  RunEverything("file", "json",
                {{"AWS_ACCESS_KEY_ID", ""},
                 {"AWS_SECRET_ACCESS_KEY", ""},
                 {"AWS_SESSION_TOKEN", ""},
                 {"AWS_PROFILE", ""},
                 {"AWS_SHARED_CREDENTIALS_FILE", file},
                 {"AWS_EC2_METADATA_DISABLED", ""}});
  ExpectNoLeaks();
  Record("secrets_shared_file_credentials", "the shared credentials file");
}

TEST_F(Secrets, NoCommandPrintsOrStoresCredentialsFromTheInstanceRole) {
  RunEverything("role", "text",
                {{"AWS_ACCESS_KEY_ID", ""},
                 {"AWS_SECRET_ACCESS_KEY", ""},
                 {"AWS_SESSION_TOKEN", ""},
                 {"AWS_PROFILE", ""},
                 {"AWS_SHARED_CREDENTIALS_FILE", dir_.Join("no-such-file")},
                 {"AWS_CONFIG_FILE", dir_.Join("no-such-file")},
                 {"AWS_EC2_METADATA_DISABLED", ""}});
  ExpectNoLeaks();
  // The role's credentials were really used: the simulator served them.
  const auto requests = nlohmann::json::parse(imds_.Control("GET", "/_sim/requests"));
  int credential_reads = 0;
  for (const auto& r : requests) {
    if (r["path"].get<std::string>().find("security-credentials/spotguard-test-role") !=
        std::string::npos) {
      ++credential_reads;
    }
  }
  EXPECT_GT(credential_reads, 0);
  Record("secrets_instance_role_credentials", "the instance role (IMDS)");
}

// The Ceph gateway behind a TLS front whose certificate is self-signed.
class Https : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(LoadS3TestEnv(&s3_));
    auto r = RunCommand({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                         "-keyout", dir_.Join("key.pem"), "-out", dir_.Join("cert.pem")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string upstream = s3_.endpoint.substr(s3_.endpoint.find("://") + 3);
    if (upstream.ends_with("/")) upstream.pop_back();
    const std::string port_file = dir_.Join("port");
    front_.emplace(std::vector<std::string>{
        SPOTGUARD_PYTHON, SPOTGUARD_SOURCE_DIR "/tests/tools/tls_forward.py", dir_.Join("cert.pem"),
        dir_.Join("key.pem"), port_file, upstream});
    for (int i = 0; i < 1000 && !std::filesystem::exists(port_file); ++i) {
      std::this_thread::sleep_for(10ms);
    }
    auto port = ReadFileToString(port_file);
    ASSERT_TRUE(port.ok()) << "the TLS front did not start";
    endpoint_ = "https://127.0.0.1:" + *port;
    prefix_ = "https-tests/" + RandomHex(6);
    ASSERT_TRUE(std::filesystem::create_directories(dir_.Join("ckpt")));
    dir_.WriteFile("ckpt/step_5.ckpt", std::string(100000, 'x') + "end");
  }

  CommandResult Spotguard(std::vector<std::string> args, const std::map<std::string, std::string>& extra = {}) {
    std::map<std::string, std::string> env = {{"AWS_ACCESS_KEY_ID", s3_.access_key},
                                              {"AWS_SECRET_ACCESS_KEY", s3_.secret_key},
                                              {"AWS_EC2_METADATA_DISABLED", "true"},
                                              {"SPOTGUARD_CONFIG", ""},
                                              {"AWS_CA_BUNDLE", ""}};
    for (const auto& [k, v] : extra) env[k] = v;
    args.insert(args.begin(), SPOTGUARD_BIN);
    const std::vector<std::string> common = {"--store", "s3://" + s3_.bucket + "/" + prefix_,
                                             "--endpoint", endpoint_, "--job", "j",
                                             "--checkpoint-dir", dir_.Join("ckpt"),
                                             "--preset", "generic"};
    args.insert(args.end(), common.begin(), common.end());
    return RunCommand(args, env, 120s);
  }

  S3TestEnv s3_;
  TempDir dir_;
  std::optional<BackgroundProcess> front_;
  std::string endpoint_, prefix_;
};

TEST_F(Https, AnEndpointWithAnUntrustedCertificateIsRefused) {
  auto r = Spotguard({"snapshot", "--dir", dir_.Join("ckpt")});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("certificate"), std::string::npos) << r.err;
  r = Spotguard({"ls"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("certificate"), std::string::npos) << r.err;
  // Nothing reached the bucket through the refused connection.
  auto store = OpenTestS3Store(s3_, prefix_);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(AllObjects(*store).empty());
}

TEST_F(Https, ThereIsNoSwitchToTurnVerificationOff) {
  for (const char* flag : {"--no-verify-ssl", "--insecure", "--no-verify-tls"}) {
    auto r = Spotguard({"ls", flag});
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.err;
  }
  // Nor a config key: unknown keys are configuration errors.
  const std::string config = dir_.WriteFile("c.json", R"({"tls_verify": false, "verify_ssl": false})");
  auto r = Spotguard({"ls", "-c", config});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tls_verify"), std::string::npos) << r.err;
}

TEST_F(Https, AwsCaBundleMakesTheSameEndpointWork) {
  const std::map<std::string, std::string> ca = {{"AWS_CA_BUNDLE", dir_.Join("cert.pem")}};
  auto r = Spotguard({"snapshot", "--dir", dir_.Join("ckpt")}, ca);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Spotguard({"restore", "--to", dir_.Join("back")}, ca);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto back = ReadFileToString(dir_.Join("back/step_5.ckpt"));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, std::string(100000, 'x') + "end");
  auto store = OpenTestS3Store(s3_, prefix_);
  ASSERT_NE(store, nullptr);
  DeleteAll(*store);
}

}  // namespace
}  // namespace sg::testing

// TLS verification is always on: a server whose certificate no trusted CA
// signed is refused, and AWS_CA_BUNDLE adds a CA without a switch to turn
// checking off.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/files.h"
#include "common/http.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

class Tls : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = RunCommand({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                         "-keyout", dir_.Join("key.pem"), "-out", dir_.Join("cert.pem")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string port_file = dir_.Join("port");
    server_.emplace(std::vector<std::string>{
        SPOTGUARD_PYTHON, SPOTGUARD_SOURCE_DIR "/tests/tools/https_server.py",
        dir_.Join("cert.pem"), dir_.Join("key.pem"), port_file});
    for (int i = 0; i < 500 && !std::filesystem::exists(port_file); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto port = ReadFileToString(port_file);
    ASSERT_TRUE(port.ok()) << "the HTTPS server did not start";
    url_ = "https://127.0.0.1:" + *port + "/";
  }

  TempDir dir_;
  std::optional<BackgroundProcess> server_;
  std::string url_;
};

TEST_F(Tls, AnUntrustedCertificateIsRefused) {
  CurlTransport transport;
  HttpRequest req;
  req.url = url_;
  auto r = transport.Send(req);
  ASSERT_FALSE(r.ok()) << "HTTP " << r->status;
  // Not retryable: no number of retries makes the certificate trusted.
  EXPECT_TRUE(r.status().Is(StatusCode::kPermissionDenied)) << r.status().ToString();
  EXPECT_NE(r.status().message().find("certificate"), std::string::npos) << r.status().message();
}

TEST_F(Tls, AnExtraCaBundleIsTrusted) {
  CurlTransport::Options options;
  options.ca_bundle = dir_.Join("cert.pem");
  CurlTransport transport(options);
  HttpRequest req;
  req.url = url_;
  auto r = transport.Send(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok");
}

}  // namespace
}  // namespace sg::testing

// Streamed ranged reads (ObjectStore::GetTo, common/body_sink.h) from the
// Ceph gateway through tests/tools/fault_proxy.py: a body cut short is read
// again from its start, and the sink is told so by offset 0; an error the
// sink returns ends the read at once, as the sink's own, without a retry.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/reliability/net_support.h"
#include "tests/support/random_bytes.h"

namespace sg::testing {
namespace {

class StreamedRead : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(LoadS3TestEnv(&env_));
    std::random_device rd;
    prefix_ = "rel-stream-" + std::to_string(rd());
    direct_ = OpenTestS3Store(env_, prefix_);
    ASSERT_NE(direct_, nullptr);
    data_ = RandomBytes(6 << 20, 41);
    ASSERT_TRUE(direct_->Put("streamed.bin", data_, PutCondition::None()).ok());
  }
  void TearDown() override { DeletePrefix(env_, prefix_); }

  // The store through a fault proxy with `config` (fault_proxy.py --config).
  std::unique_ptr<S3Store> Through(ToolServer& proxy) {
    S3TestEnv via = env_;
    via.endpoint = proxy.endpoint();
    return OpenTestS3Store(via, prefix_);
  }

  S3TestEnv env_;
  std::string prefix_;
  std::unique_ptr<S3Store> direct_;
  std::string data_;
};

// Gathers what a sink is handed, as a decoder would: offset 0 after earlier
// pieces drops them.
struct Gathered {
  std::string bytes;
  int restarts = 0;
  bool in_order = true;

  Status Take(uint64_t at, std::string_view piece) {
    if (at == 0 && !bytes.empty()) {
      ++restarts;
      bytes.clear();
    }
    in_order &= at == bytes.size();
    bytes.append(piece);
    return Status::Ok();
  }
};

TEST_F(StreamedRead, ABodyCutShortIsHandedOverAgainFromItsStart) {
  ToolServer proxy("fault_proxy.py",
                   {"--upstream", ProxyUpstream(env_.endpoint), "--config",
                    nlohmann::json({{"rate", 1.0},
                                    {"kinds", {"cut_response"}},
                                    {"match", "^GET .*streamed\\.bin"},
                                    {"max_faults", 1}})
                        .dump()});
  auto store = Through(proxy);
  ASSERT_NE(store, nullptr);
  const uint64_t offset = 1 << 20, length = 4 << 20;
  Gathered got;
  Status st = store->GetTo("streamed.bin", ByteRange{offset, length},
                           [&](uint64_t at, std::string_view piece) { return got.Take(at, piece); });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ProxyStats(proxy).value("injected", 0L), 1);
  // The proxy sent half the body before the reset: the retry started over.
  EXPECT_EQ(got.restarts, 1);
  EXPECT_TRUE(got.in_order);
  EXPECT_TRUE(got.bytes == data_.substr(offset, length)) << "the range differs after the retry";
}

TEST_F(StreamedRead, TheSinksErrorEndsTheReadWithoutARetry) {
  ToolServer proxy("fault_proxy.py",
                   {"--upstream", ProxyUpstream(env_.endpoint), "--config",
                    nlohmann::json({{"rate", 0.0}}).dump()});
  auto store = Through(proxy);
  ASSERT_NE(store, nullptr);
  const long before = ProxyStats(proxy).value("requests", 0L);  // opening checks the bucket
  int calls = 0;
  Status st = store->GetTo("streamed.bin", ByteRange{0, data_.size()},
                           [&](uint64_t, std::string_view piece) {
                             // A transport may ask with no bytes (common/body_sink.h).
                             if (piece.empty()) return Status::Ok();
                             ++calls;
                             return Status::Corruption("frame 3 does not check");
                           });
  EXPECT_TRUE(st.Is(StatusCode::kCorruption)) << st.ToString();
  EXPECT_NE(st.message().find("frame 3 does not check"), std::string::npos) << st.ToString();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ProxyStats(proxy).value("requests", 0L) - before, 1) << "the read was retried";
}

TEST_F(StreamedRead, AStreamedRangeEqualsTheSameRangeRead) {
  Gathered got;
  const ByteRange range{12345, 3 << 20};
  ASSERT_TRUE(direct_
                  ->GetTo("streamed.bin", range,
                          [&](uint64_t at, std::string_view piece) { return got.Take(at, piece); })
                  .ok());
  auto whole = direct_->Get("streamed.bin", range, nullptr);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(got.restarts, 0);
  EXPECT_TRUE(got.in_order);
  EXPECT_TRUE(got.bytes == *whole);
  // A missing object is NotFound, and the sink is handed no byte (it may be
  // asked with none while the answer is awaited, common/body_sink.h).
  bool called = false;
  Status missing = direct_->GetTo("absent.bin", ByteRange{0, 10}, [&](uint64_t, std::string_view piece) {
    called = called || !piece.empty();
    return Status::Ok();
  });
  EXPECT_TRUE(missing.Is(StatusCode::kNotFound)) << missing.ToString();
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace sg::testing

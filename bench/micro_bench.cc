// Micro-benchmarks of the per-byte and per-request work on spotguard's
// upload and restore paths (Google Benchmark):
//   SigV4        signing one UploadPart PUT (what every 8 MiB part costs)
//   SHA-256      of an 8 MiB buffer, streamed (the writer hashes every raw file
//                and frame, and every part for its signature, which the server
//                checks)
//   MD5          of an 8 MiB buffer (the Content-MD5 every part carried until
//                2026-11-30, kept for comparison: SHA-256 replaced it)
//   CRC32C       of an 8 MiB buffer, table-driven and with SSE4.2's crc32
//                instruction: what S3's x-amz-checksum-crc32c would cost per
//                part (a candidate, not what spotguard does: Ceph RGW 16
//                ignores it)
//   shuffle      ShuffleBytes / UnshuffleBytes, widths 2 and 4, 8 MiB
//   frame        EncodeFrame / DecodeFrame of one 8 MiB frame at level 1,
//                plain zstd and zstd+shuffle4; and as the reference, libzstd's
//                one-shot ZSTD_compress / ZSTD_decompress on the same bytes
// The frame and shuffle data are 8 MiB from the middle of the file named by
// SG_MICRO_DATA (a real checkpoint); without it, float32 values drawn from a
// normal distribution (weights-like), said in the benchmark's label.
//
//   micro_bench [--benchmark_format=json] [Google Benchmark flags]
#include <benchmark/benchmark.h>
#include <zstd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "common/crypto.h"
#include "common/sigv4.h"
#include "common/zstd_codec.h"

namespace {

constexpr size_t kBuffer = 8 << 20;

struct Data {
  std::string bytes;
  std::string label;
};

const Data& BenchData() {
  static const Data data = [] {
    Data d;
    if (const char* path = std::getenv("SG_MICRO_DATA"); path && *path) {
      std::ifstream in(path, std::ios::binary | std::ios::ate);
      const auto size = static_cast<size_t>(in.tellg());
      if (in && size >= kBuffer) {
        d.bytes.resize(kBuffer);
        in.seekg(static_cast<std::streamoff>((size - kBuffer) / 2));
        in.read(d.bytes.data(), static_cast<std::streamsize>(kBuffer));
        if (in) {
          const std::string p(path);
          d.label = "real:" + p.substr(p.find_last_of('/') + 1);
          return d;
        }
      }
    }
    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    d.bytes.resize(kBuffer);
    for (size_t i = 0; i + 4 <= kBuffer; i += 4) {
      const float v = normal(rng);
      std::memcpy(d.bytes.data() + i, &v, 4);
    }
    d.label = "synthetic-fp32";
    return d;
  }();
  return data;
}

void BM_SigV4SignUploadPart(benchmark::State& state) {
  const sg::AwsCredentials creds{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                 ""};
  const auto now = std::chrono::system_clock::now();
  for (auto _ : state) {
    sg::SigningRequest r;
    r.method = "PUT";
    r.path = "/bucket/jobs/llm-7b/snapshots/0000000042/files/model/checkpoint.pt.zst";
    r.query = {{"partNumber", "17"}, {"uploadId", "2~fcGq3kZf6nXl4aE9mBQyXy0t1yFXq8Wv"}};
    r.headers = {{"host", "bucket.s3.us-east-1.amazonaws.com"},
                 {"Content-Length", "8388608"}};
    // The part's SHA-256, hashed once beforehand (BM_Sha256Stream8MiB).
    r.payload_sha256_hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    sg::SignRequest(r, creds, "us-east-1", "s3", now);
    benchmark::DoNotOptimize(r.headers);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SigV4SignUploadPart);

void BM_Sha256Stream8MiB(benchmark::State& state) {
  const std::string& buf = BenchData().bytes;
  for (auto _ : state) {
    sg::Sha256Stream sha;
    sha.Update(buf);
    benchmark::DoNotOptimize(sha.FinishHex());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buf.size()));
}
BENCHMARK(BM_Sha256Stream8MiB)->Unit(benchmark::kMillisecond);

void BM_Md5ContentMd5Of8MiBPart(benchmark::State& state) {
  const std::string& buf = BenchData().bytes;
  for (auto _ : state) benchmark::DoNotOptimize(sg::Base64Encode(sg::Md5(buf)));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buf.size()));
}
BENCHMARK(BM_Md5ContentMd5Of8MiBPart)->Unit(benchmark::kMillisecond);

// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), one byte at a time
// from a 256-entry table.
uint32_t Crc32cTable(const std::string& data) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : data) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

// The same with SSE4.2's crc32 instruction, 8 bytes at a time.
__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(const std::string& data) {
  uint64_t crc = 0xFFFFFFFFu;
  size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, data.data() + i, 8);
    crc = __builtin_ia32_crc32di(crc, word);
  }
  auto c = static_cast<uint32_t>(crc);
  for (; i < data.size(); ++i) c = __builtin_ia32_crc32qi(c, static_cast<unsigned char>(data[i]));
  return c ^ 0xFFFFFFFFu;
}

// 0xE3069283 is CRC32C's published check value of "123456789".
bool Crc32cChecks(uint32_t (*crc)(const std::string&)) {
  return crc("123456789") == 0xE3069283u && crc(std::string(32, '\0')) == 0x8A9136AAu;
}

void BM_Crc32c8MiB(benchmark::State& state) {
  const bool hardware = state.range(0) == 1;
  if (hardware && !__builtin_cpu_supports("sse4.2")) {
    state.SkipWithError("this CPU has no SSE4.2");
    return;
  }
  auto* crc = hardware ? &Crc32cSse42 : &Crc32cTable;
  if (!Crc32cChecks(crc)) {
    state.SkipWithError("CRC32C check values do not match");
    return;
  }
  const std::string& buf = BenchData().bytes;
  for (auto _ : state) benchmark::DoNotOptimize(crc(buf));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buf.size()));
}
BENCHMARK(BM_Crc32c8MiB)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_Shuffle(benchmark::State& state) {
  const std::string& buf = BenchData().bytes;
  const int width = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(sg::ShuffleBytes(buf, width));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buf.size()));
}
BENCHMARK(BM_Shuffle)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond);

void BM_Unshuffle(benchmark::State& state) {
  const int width = static_cast<int>(state.range(0));
  const std::string shuffled = sg::ShuffleBytes(BenchData().bytes, width);
  for (auto _ : state) benchmark::DoNotOptimize(sg::UnshuffleBytes(shuffled, width));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * shuffled.size()));
}
BENCHMARK(BM_Unshuffle)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond);

// The floor any shuffle pays: one copy of the buffer.
void BM_Memcpy(benchmark::State& state) {
  const std::string& buf = BenchData().bytes;
  for (auto _ : state) benchmark::DoNotOptimize(std::string(buf));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buf.size()));
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);

sg::Codec CodecArg(int64_t shuffle) {
  return shuffle ? sg::Codec::kZstdShuffle4 : sg::Codec::kZstd;
}

void BM_EncodeFrameLevel1(benchmark::State& state) {
  const Data& data = BenchData();
  const sg::Codec codec = CodecArg(state.range(0));
  size_t stored = 0;
  for (auto _ : state) {
    auto frame = sg::EncodeFrame(codec, data.bytes, 1);
    if (!frame.ok()) {
      state.SkipWithError(frame.status().ToString().c_str());
      break;
    }
    stored = frame->size();
    benchmark::DoNotOptimize(frame);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.bytes.size()));
  state.counters["ratio"] = stored ? static_cast<double>(data.bytes.size()) / stored : 0.0;
  state.SetLabel(std::string(sg::CodecName(codec)) + " " + data.label);
}
BENCHMARK(BM_EncodeFrameLevel1)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_DecodeFrameLevel1(benchmark::State& state) {
  const Data& data = BenchData();
  const sg::Codec codec = CodecArg(state.range(0));
  auto frame = sg::EncodeFrame(codec, data.bytes, 1);
  if (!frame.ok()) {
    state.SkipWithError(frame.status().ToString().c_str());
    return;
  }
  // Checked once, outside the timed loop.
  auto check = sg::DecodeFrame(codec, *frame, data.bytes.size());
  if (!check.ok() || *check != data.bytes) {
    state.SkipWithError("DecodeFrame did not give back the original bytes");
    return;
  }
  for (auto _ : state) {
    auto raw = sg::DecodeFrame(codec, *frame, data.bytes.size());
    if (!raw.ok()) {
      state.SkipWithError(raw.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(raw);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.bytes.size()));
  state.SetLabel(std::string(sg::CodecName(codec)) + " " + data.label);
}
BENCHMARK(BM_DecodeFrameLevel1)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The alternative to EncodeFrame: libzstd's simple one-shot call, no
// checksum, no shuffle, a fresh context each time.
void BM_LibzstdCompressLevel1(benchmark::State& state) {
  const std::string& raw = BenchData().bytes;
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  size_t n = 0;
  for (auto _ : state) {
    n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 1);
    if (ZSTD_isError(n)) {
      state.SkipWithError(ZSTD_getErrorName(n));
      break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * raw.size()));
  state.counters["ratio"] = n ? static_cast<double>(raw.size()) / n : 0.0;
}
BENCHMARK(BM_LibzstdCompressLevel1)->Unit(benchmark::kMillisecond);

void BM_LibzstdDecompress(benchmark::State& state) {
  const std::string& raw = BenchData().bytes;
  std::string frame(ZSTD_compressBound(raw.size()), '\0');
  frame.resize(ZSTD_compress(frame.data(), frame.size(), raw.data(), raw.size(), 1));
  std::string out(raw.size(), '\0');
  for (auto _ : state) {
    const size_t n = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
    if (n != raw.size()) {
      state.SkipWithError("ZSTD_decompress failed");
      break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * raw.size()));
}
BENCHMARK(BM_LibzstdDecompress)->Unit(benchmark::kMillisecond);

// Where DecodeFrame's time goes beyond ZSTD_decompress: the frame it decodes
// carries an XXH64 checksum that zstd verifies, and each call decodes into a
// freshly allocated, zero-filled 8 MiB string.
std::string ChecksummedFrame(const std::string& raw) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  std::string frame(ZSTD_compressBound(raw.size()), '\0');
  frame.resize(ZSTD_compress2(c, frame.data(), frame.size(), raw.data(), raw.size()));
  ZSTD_freeCCtx(c);
  return frame;
}

void BM_LibzstdDecompressChecksummed(benchmark::State& state) {
  const std::string& raw = BenchData().bytes;
  const std::string frame = ChecksummedFrame(raw);
  const bool fresh_buffer = state.range(0) != 0;
  std::string reused(raw.size(), '\0');
  for (auto _ : state) {
    std::string fresh;
    if (fresh_buffer) fresh.assign(raw.size(), '\0');
    std::string& out = fresh_buffer ? fresh : reused;
    const size_t n = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
    if (n != raw.size()) {
      state.SkipWithError("ZSTD_decompress failed");
      break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * raw.size()));
  state.SetLabel(fresh_buffer ? "checksummed frame, fresh zero-filled buffer each call"
                              : "checksummed frame, reused buffer");
}
BENCHMARK(BM_LibzstdDecompressChecksummed)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

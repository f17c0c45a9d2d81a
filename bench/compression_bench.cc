// Compression of real checkpoint files with spotguard's own codec, run the
// way the snapshot writer runs it: 8 MiB frames (kFrameSize), EncodeFrame on
// a BoundedExecutor of T threads behind an OrderedPipeline of window 2*T, and
// decoding the same way (DecodeFrame, in order). Each file is read into
// memory first, so the figures are the codec's, not the disk's; the writer's
// SHA-256 of the raw bytes is not included (bench/sections/07-micro.sh
// measures it).
//
//   compression_bench --levels 1,3,6 --threads 1,2 [--reps R] FILE...
//
// Times are the best of R runs (default 1): the machine may be shared.
// For each file, level, codec and thread count one TSV line on stdout:
//   file codec level threads raw_bytes stored_bytes compress_s decompress_s auto_codec
// where codec is "zstd" (shuffle off) or the file's better shuffle width
// ("zstd+shuffle4" / "zstd+shuffle2", chosen on the writer's three 1 MiB
// samples), and auto_codec is what the writer's ShufflePolicy::kAuto picks
// for that file at that level. Every decoded frame is compared with the
// original; a mismatch exits 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/repo/manifest.h"
#include "common/bounded_executor.h"
#include "common/ordered_pipeline.h"
#include "common/zstd_codec.h"

namespace {

using sg::Codec;
using sg::Status;
using sg::StatusOr;

constexpr size_t kSample = 1 << 20;  // the writer's kSampleSize

std::vector<int> ParseList(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
  return out;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The writer's samples: start, middle, end.
std::vector<std::string_view> Samples(const std::string& data) {
  std::vector<std::string_view> out;
  const size_t size = data.size();
  for (size_t at : {size_t{0}, size / 2, size > kSample ? size - kSample : 0}) {
    out.push_back(std::string_view(data).substr(at, kSample));
    if (size <= kSample) break;
  }
  return out;
}

size_t SampleBytes(const std::vector<std::string_view>& samples, Codec codec, int level) {
  size_t total = 0;
  for (std::string_view s : samples) {
    auto encoded = sg::EncodeFrame(codec, s, level);
    total += encoded.ok() ? encoded->size() : s.size();
  }
  return total;
}

struct Encoded {
  std::vector<std::string> frames;
  uint64_t stored = 0;
};

StatusOr<Encoded> Compress(const std::string& data, Codec codec, int level, int threads) {
  Encoded out;
  sg::BoundedExecutor executor(threads, 2 * threads);
  sg::OrderedPipeline<std::string> pipeline(executor, static_cast<size_t>(2 * threads),
                                            [&](std::string frame) -> Status {
                                              out.stored += frame.size();
                                              out.frames.push_back(std::move(frame));
                                              return Status::Ok();
                                            });
  for (size_t offset = 0; offset < data.size(); offset += sg::kFrameSize) {
    std::string_view raw = std::string_view(data).substr(offset, sg::kFrameSize);
    SG_RETURN_IF_ERROR(pipeline.Submit([codec, level, raw] {
      return sg::EncodeFrame(codec, raw, level);
    }));
  }
  SG_RETURN_IF_ERROR(pipeline.Finish());
  return out;
}

Status Decompress(const std::string& data, const Encoded& encoded, Codec codec, int threads) {
  sg::BoundedExecutor executor(threads, 2 * threads);
  size_t at = 0;
  sg::OrderedPipeline<std::string> pipeline(
      executor, static_cast<size_t>(2 * threads), [&](std::string raw) -> Status {
        if (raw.size() > data.size() - at || std::memcmp(raw.data(), data.data() + at, raw.size()))
          return Status::Corruption("decoded frame differs from the original at " +
                                    std::to_string(at));
        at += raw.size();
        return Status::Ok();
      });
  for (size_t i = 0; i < encoded.frames.size(); ++i) {
    const uint64_t raw_size =
        std::min<uint64_t>(sg::kFrameSize, data.size() - i * sg::kFrameSize);
    std::string_view stored = encoded.frames[i];
    SG_RETURN_IF_ERROR(pipeline.Submit([codec, stored, raw_size] {
      return sg::DecodeFrame(codec, stored, raw_size);
    }));
  }
  SG_RETURN_IF_ERROR(pipeline.Finish());
  if (at != data.size()) return Status::Corruption("decoded fewer bytes than the original");
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> levels = {1, 3, 6}, thread_counts = {1};
  int reps = 1;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--levels" && i + 1 < argc) {
      levels = ParseList(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      thread_counts = ParseList(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::stoi(argv[++i]));
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "usage: compression_bench [--levels 1,3,6] [--threads 1,N] [--reps R] FILE...\n";
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::cerr << "compression_bench: no files\n";
    return 2;
  }
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    std::string data;
    if (in) {
      data.resize(static_cast<size_t>(in.tellg()));
      in.seekg(0);
      in.read(data.data(), static_cast<std::streamsize>(data.size()));
    }
    if (!in) {
      std::cerr << "compression_bench: cannot read " << path << "\n";
      return 1;
    }
    const std::string name = path.substr(path.find_last_of('/') + 1);
    const std::vector<std::string_view> samples = Samples(data);
    for (int level : levels) {
      const Codec auto_codec = sg::ChooseCodec(samples, sg::ShufflePolicy::kAuto, level);
      const Codec shuffled =
          SampleBytes(samples, Codec::kZstdShuffle4, level) <=
                  SampleBytes(samples, Codec::kZstdShuffle2, level)
              ? Codec::kZstdShuffle4
              : Codec::kZstdShuffle2;
      for (Codec codec : {Codec::kZstd, shuffled}) {
        for (int threads : thread_counts) {
          double compress_s = 1e300, decompress_s = 1e300;
          uint64_t stored = 0;
          for (int rep = 0; rep < reps; ++rep) {
            auto start = std::chrono::steady_clock::now();
            auto encoded = Compress(data, codec, level, threads);
            compress_s = std::min(compress_s, Seconds(start));
            if (!encoded.ok()) {
              std::cerr << "compression_bench: " << encoded.status().ToString() << "\n";
              return 1;
            }
            stored = encoded->stored;
            start = std::chrono::steady_clock::now();
            Status st = Decompress(data, *encoded, codec, threads);
            decompress_s = std::min(decompress_s, Seconds(start));
            if (!st.ok()) {
              std::cerr << "compression_bench: " << name << ": " << st.ToString() << "\n";
              return 1;
            }
          }
          std::printf("%s\t%s\t%d\t%d\t%zu\t%llu\t%.4f\t%.4f\t%s\n", name.c_str(),
                      std::string(sg::CodecName(codec)).c_str(), level, threads, data.size(),
                      static_cast<unsigned long long>(stored), compress_s, decompress_s,
                      std::string(sg::CodecName(auto_codec)).c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}

// Throughput of the file:// store's atomic put (write, fsync, rename, fsync
// dir) and ranged get. Run: build/release/bench/file_store_bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/file_store.h"
#include "common/files.h"

namespace {

std::string BenchRoot() {
  const char* base = std::getenv("TMPDIR");
  return std::string(base && *base ? base : "/tmp") + "/spotguard-bench-" + sg::RandomHex();
}

void BM_FileStorePut(benchmark::State& state) {
  const std::string root = BenchRoot();
  auto store = sg::FileStore::Open(root);
  const std::string data(static_cast<size_t>(state.range(0)), 'x');
  int i = 0;
  for (auto _ : state) {
    auto r = (*store)->Put("bench/obj-" + std::to_string(i++ % 8), data, sg::PutCondition::None());
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  std::filesystem::remove_all(root);
}
BENCHMARK(BM_FileStorePut)->Arg(64 << 10)->Arg(16 << 20)->Unit(benchmark::kMillisecond);

void BM_FileStoreRangedGet(benchmark::State& state) {
  const std::string root = BenchRoot();
  auto store = sg::FileStore::Open(root);
  const uint64_t size = 64 << 20;
  (void)(*store)->Put("bench/big", std::string(size, 'y'), sg::PutCondition::None());
  const uint64_t chunk = static_cast<uint64_t>(state.range(0));
  uint64_t offset = 0;
  for (auto _ : state) {
    auto r = (*store)->Get("bench/big", sg::ByteRange{offset, chunk}, nullptr);
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
    offset = (offset + chunk) % size;
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  std::filesystem::remove_all(root);
}
BENCHMARK(BM_FileStoreRangedGet)->Arg(8 << 20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

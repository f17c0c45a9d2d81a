#include "common/spare_buffer.h"

#include <algorithm>
#include <deque>
#include <mutex>

namespace sg {
namespace {

constexpr uint64_t kRecycleMin = 1u << 20;
constexpr uint64_t kRecycleMax = 64u << 20;
thread_local std::string spare;

// The shared pool: idle buffers, oldest first.
struct SharedPool {
  std::mutex mu;
  std::deque<std::string> idle;
  uint64_t idle_bytes = 0;
};

SharedPool& Shared() {
  static SharedPool* pool = new SharedPool;  // never destroyed: threads may outlive main
  return *pool;
}

}  // namespace

std::string TakeSpareBuffer(uint64_t size) {
  std::string out;
  if (size >= kRecycleMin && size <= spare.capacity()) {
    out.swap(spare);
    out.clear();
  } else if (size > 0) {
    out.reserve(std::min(size, kRecycleMax));
  }
  return out;
}

void RecycleResponseBody(std::string&& body) {
  if (body.capacity() < kRecycleMin || body.capacity() > kRecycleMax) return;
  if (body.capacity() > spare.capacity()) spare = std::move(body);
}

std::string TakeSharedBuffer(uint64_t size) {
  std::string out;
  // A small string never takes a pooled one (it may be kept long, holding
  // megabytes for a few bytes), nor a buffer much larger than asked for.
  if (size >= kRecycleMin) {
    SharedPool& pool = Shared();
    std::lock_guard<std::mutex> lock(pool.mu);
    auto best = pool.idle.end();
    for (auto it = pool.idle.begin(); it != pool.idle.end(); ++it) {
      const bool fits = it->capacity() >= size && it->capacity() <= 2 * size + kRecycleMin * 2;
      if (fits && (best == pool.idle.end() || it->capacity() < best->capacity())) best = it;
    }
    if (best != pool.idle.end()) {
      out.swap(*best);
      pool.idle_bytes -= out.capacity();
      pool.idle.erase(best);
    }
  }
  if (out.capacity() < size) {
    // A whole number of MiB, with room to spare: a frame read (8 MiB) and
    // a compressed one (up to ZSTD_compressBound, 8 MiB + 32 KiB) then
    // take the same buffers.
    constexpr uint64_t kMiB = 1u << 20;
    out.reserve(size < kRecycleMin ? size : (size + kMiB / 4 + kMiB - 1) / kMiB * kMiB);
  }
  return out;
}

void GiveSharedBuffer(std::string&& buffer) {
  if (buffer.capacity() < kRecycleMin || buffer.capacity() > kRecycleMax) return;
  std::deque<std::string> freed;  // freed outside the lock
  SharedPool& pool = Shared();
  std::lock_guard<std::mutex> lock(pool.mu);
  pool.idle_bytes += buffer.capacity();
  pool.idle.push_back(std::move(buffer));
  while (pool.idle_bytes > kSharedIdleBytes) {
    pool.idle_bytes -= pool.idle.front().capacity();
    freed.push_back(std::move(pool.idle.front()));
    pool.idle.pop_front();
  }
}

void ReleaseSharedBuffers() {
  std::deque<std::string> freed;
  SharedPool& pool = Shared();
  std::lock_guard<std::mutex> lock(pool.mu);
  freed.swap(pool.idle);
  pool.idle_bytes = 0;
}

uint64_t SharedBufferIdleBytes() {
  SharedPool& pool = Shared();
  std::lock_guard<std::mutex> lock(pool.mu);
  return pool.idle_bytes;
}

}  // namespace sg

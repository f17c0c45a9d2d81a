#include "common/spare_buffer.h"

#include <algorithm>

namespace sg {
namespace {

constexpr uint64_t kRecycleMin = 1u << 20;
constexpr uint64_t kRecycleMax = 64u << 20;
thread_local std::string spare;

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

}  // namespace sg

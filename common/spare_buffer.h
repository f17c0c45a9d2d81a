// One spare buffer per thread for large bodies read from a store: a restore
// reads gigabytes in ranges of up to 16 MiB, and each fresh buffer would
// cost a page fault per 4 KiB (glibc maps large blocks anew each time) and,
// while the previous one is still kept, twice the memory. The S3 transport
// (common/http.cc) and the file store (common/file_store.cc) take the spare
// for a body that fits; the reader gives each body back once it is used.
#pragma once

#include <cstdint>
#include <string>

namespace sg {

// An empty string for a body of `size` bytes: the thread's spare when it
// holds that many (and `size` is at least 1 MiB), else a new string with
// room for `size` reserved (up to 64 MiB; beyond that it grows as filled).
std::string TakeSpareBuffer(uint64_t size);

// Gives a large body back once its bytes are used, so that the next large
// body read on this thread goes into the same memory. One spare per
// thread, of at least 1 MiB and at most 64 MiB; anything else is freed as
// usual.
void RecycleResponseBody(std::string&& body);

}  // namespace sg

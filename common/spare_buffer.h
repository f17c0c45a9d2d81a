// Large buffers reused instead of mapped anew. glibc maps every block of
// 1 MiB and more on its own (main.cc sets M_MMAP_THRESHOLD so that freed
// memory goes back to the kernel) and each fresh one costs a page fault per
// 4 KiB: on the 2-core VM of bench/ an 8 MiB buffer mapped, filled and
// freed took 0.9 CPU s per GB against 0.1 s for one reused.
//
// - Restore reads gigabytes in ranges of up to 16 MiB on a few threads:
//   one spare per thread (TakeSpareBuffer, RecycleResponseBody). The S3
//   transport (common/http.cc) and the file store (common/file_store.cc)
//   take the spare for a body that fits; the reader gives each body back
//   once it is used.
// - An upload hands its buffers from thread to thread (a frame read, then
//   compressed on a worker, copied into a part, sent by another): those go
//   into one shared pool (TakeSharedBuffer, GiveSharedBuffer), which keeps
//   at most kSharedIdleBytes idle and is emptied when the work is done
//   (ReleaseSharedBuffers), so an idle agent holds none.
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

inline constexpr uint64_t kSharedIdleBytes = 64ull << 20;

// A string with room for at least `size` bytes: for 1 MiB and more, the
// smallest idle buffer of the shared pool that holds that many (and not
// more than twice as many, plus 2 MiB), else a new empty one. Its size and
// bytes are what its last user left: resize() it to what is written next
// (a reused buffer is then not zeroed again), or clear() it.
std::string TakeSharedBuffer(uint64_t size);
// Puts a buffer of 1 MiB to 64 MiB into the shared pool for the next
// TakeSharedBuffer, on any thread; the oldest idle ones are freed beyond
// kSharedIdleBytes. Anything else is freed as usual.
void GiveSharedBuffer(std::string&& buffer);
// Frees every idle buffer of the shared pool (at the end of an upload).
void ReleaseSharedBuffers();
// The capacity of the idle buffers in the shared pool, added up.
uint64_t SharedBufferIdleBytes();

}  // namespace sg

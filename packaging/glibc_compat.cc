// Linked into the portable (package) binary only: packaging/portable.cmake.
//
// The package must run with glibc 2.34 (Amazon Linux 2023), but it is built
// on Debian 12 (glibc 2.36), and GCC 12's static runtime, configured against
// that glibc, uses two functions that older glibc versions do not have:
//
//   _dl_find_object@GLIBC_2.35  the unwinder in libgcc_eh.a (-static-libgcc)
//                               looks up the .eh_frame_hdr of the object that
//                               holds a PC with it, on every C++ throw;
//   arc4random@GLIBC_2.36       std::random_device in libstdc++.a
//                               (-static-libstdc++) can draw from it.
//
// Neither has an older symbol version to pin with .symver, so the binary
// carries its own definitions, built on functions glibc 2.34 has
// (dl_iterate_phdr, getrandom). They are hidden: the static references
// resolve to them at link time, no dynamic symbol with a version above
// GLIBC_2.34 remains, and nothing else in the process sees them.
// tests/deploy/portability_checks.sh fails if such a version comes back.
#include <dlfcn.h>
#include <link.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

struct FindRequest {
  std::uintptr_t pc;
  dl_find_object* result;
  bool found;
};

int FindObject(dl_phdr_info* info, std::size_t, void* data) {
  auto* request = static_cast<FindRequest*>(data);
  std::uintptr_t low = UINTPTR_MAX, high = 0;
  bool contains_pc = false;
  const ElfW(Phdr)* eh_frame_hdr = nullptr;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type == PT_LOAD) {
      std::uintptr_t start = info->dlpi_addr + phdr.p_vaddr;
      std::uintptr_t end = start + phdr.p_memsz;
      if (start < low) low = start;
      if (end > high) high = end;
      if (request->pc >= start && request->pc < end) contains_pc = true;
    } else if (phdr.p_type == PT_GNU_EH_FRAME) {
      eh_frame_hdr = &phdr;
    }
  }
  if (!contains_pc) return 0;  // keep looking
  std::memset(request->result, 0, sizeof *request->result);
  request->result->dlfo_map_start = reinterpret_cast<void*>(low);
  request->result->dlfo_map_end = reinterpret_cast<void*>(high);
  if (eh_frame_hdr != nullptr) {
    request->result->dlfo_eh_frame =
        reinterpret_cast<void*>(info->dlpi_addr + eh_frame_hdr->p_vaddr);
  }
  request->found = true;
  return 1;  // stop
}

}  // namespace

// glibc's contract: 0 and *result filled for an address inside a loaded
// object, -1 otherwise. libgcc reads dlfo_eh_frame (and dlfo_eh_dbase, which
// x86-64 does not have); dlfo_link_map is left null.
extern "C" __attribute__((visibility("hidden"))) int _dl_find_object(void* pc,
                                                                     dl_find_object* result) {
  FindRequest request{reinterpret_cast<std::uintptr_t>(pc), result, false};
  dl_iterate_phdr(FindObject, &request);
  return request.found ? 0 : -1;
}

// glibc's contract: 32 random bits from the kernel's generator; it never
// fails (glibc aborts when the kernel cannot deliver).
extern "C" __attribute__((visibility("hidden"))) std::uint32_t arc4random() noexcept {
  std::uint32_t value;
  auto* bytes = reinterpret_cast<unsigned char*>(&value);
  std::size_t got = 0;
  while (got < sizeof value) {
    ssize_t n = getrandom(bytes + got, sizeof value - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      std::abort();
    }
  }
  return value;
}

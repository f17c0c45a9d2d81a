# SPOTGUARD_PORTABLE=ON, the release/package build (scripts/package.sh): one
# binary that runs on Debian 12, Ubuntu 22.04/24.04 and Amazon Linux 2023.
# spdlog, fmt, pugixml, zstd, libstdc++ and libgcc are linked into it; only
# glibc (no symbol version above GLIBC_2.34), libcurl 4 and OpenSSL 3 come
# from the system. The test build (sanitizers) does not use this file.
if(SPOTGUARD_SANITIZE OR SPOTGUARD_FUZZ)
  message(FATAL_ERROR "SPOTGUARD_PORTABLE is for the release/package build, not with sanitizers or fuzzing")
endif()

# GCC 12 at -O3 (Release) reports a false -Wmaybe-uninitialized inside
# std::variant (StatusOr<RestoreResult> in agent/repo/restorer.cc); the
# sanitizer test build (-O0) does not. It stays a warning here.
add_compile_options(-Wno-error=maybe-uninitialized)

# spdlog and fmt: Debian's libspdlog-dev and libfmt-dev ship shared libraries
# only (no .a), and both libraries can be compiled from their headers. So
# spdlog::spdlog becomes header-only spdlog on header-only fmt (Debian's
# spdlog is configured for an external fmt: SPDLOG_FMT_EXTERNAL).
find_package(fmt REQUIRED)
add_library(spdlog::spdlog INTERFACE IMPORTED)
set_target_properties(spdlog::spdlog PROPERTIES
  INTERFACE_COMPILE_DEFINITIONS "SPDLOG_FMT_EXTERNAL"
  INTERFACE_LINK_LIBRARIES "fmt::fmt-header-only;Threads::Threads")

# pugixml: libpugixml-dev ships libpugixml.a (target pugixml::static).
set_target_properties(pugixml::pugixml PROPERTIES INTERFACE_LINK_LIBRARIES pugixml::static)

# zstd: libzstd-dev ships libzstd.a.
find_library(SPOTGUARD_ZSTD_STATIC NAMES libzstd.a HINTS ${ZSTD_LIBRARY_DIRS} REQUIRED)
set_target_properties(PkgConfig::ZSTD PROPERTIES INTERFACE_LINK_LIBRARIES "${SPOTGUARD_ZSTD_STATIC}")

# The executable: libstdc++ and libgcc (the unwinder) inside, no NEEDED entry
# for a library it does not use, and glibc_compat.cc for the two symbols that
# GCC 12's runtime takes from glibc 2.35/2.36 (see that file).
function(spotguard_portable_executable target)
  target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc -Wl,--as-needed)
  target_sources(${target} PRIVATE ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/glibc_compat.cc)
endfunction()

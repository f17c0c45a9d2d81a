# Installation and the packages, built in the build dir with
# `cpack -G DEB` / `cpack -G RPM` (scripts/package.sh builds both from a
# portable build): /usr/bin/spotguard, the systemd unit, a man page generated
# from --help, the docs, an example config, the license (LICENSE, Apache 2.0)
# and, for Debian, its copyright file (packaging/copyright).
include(GNUInstallDirs)
install(TARGETS spotguard RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES scripts/spotguard@.service DESTINATION lib/systemd/system)
install(FILES examples/spotguard.example.json README.md LICENSE docs/config.md docs/agent.md
        packaging/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
find_program(HELP2MAN help2man)
if(HELP2MAN)
  set(SPOTGUARD_MAN ${CMAKE_CURRENT_BINARY_DIR}/spotguard.1.gz)
  add_custom_command(
    OUTPUT ${SPOTGUARD_MAN}
    COMMAND ${HELP2MAN} --no-info --no-discard-stderr
            --name "keep long training jobs alive on spot instances"
            --include ${PROJECT_SOURCE_DIR}/packaging/man-license.h2m
            $<TARGET_FILE:spotguard> | gzip -9n > ${SPOTGUARD_MAN}
    DEPENDS spotguard ${PROJECT_SOURCE_DIR}/packaging/man-license.h2m
    VERBATIM)
  add_custom_target(manpage ALL DEPENDS ${SPOTGUARD_MAN})
  install(FILES ${SPOTGUARD_MAN} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME spotguard)
set(CPACK_PACKAGE_VENDOR "spotguard")
set(CPACK_PACKAGE_CONTACT "spotguard maintainers <spotguard@example.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "keeps long training jobs alive on spot instances")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)

# Debian and Ubuntu (.deb).
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)     # spotguard_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ca-certificates")
if(SPOTGUARD_PORTABLE)
  # The portable binary needs glibc 2.34, libcurl.so.4 and libssl.so.3/
  # libcrypto.so.3, nothing else (tests/deploy/portability_checks.sh checks
  # the binary against this list). These names resolve on Debian 12, Ubuntu
  # 22.04 and Ubuntu 24.04 (where libcurl4t64 and libssl3t64 provide them).
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6 (>= 2.34), libcurl4, libssl3")
else()
  # A build against Debian's shared libraries: dpkg-shlibdeps finds them.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()

# Amazon Linux 2023 (.rpm): glibc 2.34, libcurl (provided by libcurl-minimal
# or libcurl), openssl-libs 3. AutoReq is off so the Requires are exactly
# these; the check compares them with the binary's NEEDED entries.
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)        # spotguard-0.1.0-1.x86_64.rpm
set(CPACK_RPM_PACKAGE_RELEASE 1)
set(CPACK_RPM_PACKAGE_GROUP "Applications/System")
set(CPACK_RPM_PACKAGE_LICENSE "Apache-2.0")
set(CPACK_RPM_PACKAGE_DESCRIPTION "spotguard supervises a training job on a spot instance, snapshots its checkpoints to S3, reacts to the interruption notice and restores the newest snapshot at boot.")
set(CPACK_RPM_PACKAGE_AUTOREQ OFF)
set(CPACK_RPM_PACKAGE_REQUIRES "glibc >= 2.34, libcurl, openssl-libs >= 3")
set(CPACK_RPM_COMPRESSION_TYPE xz)
set(CPACK_RPM_PACKAGE_RELOCATABLE OFF)
# No /usr/lib/.build-id links: the package holds only its own files.
set(CPACK_RPM_SPEC_MORE_DEFINE "%define _build_id_links none")
# Directories that belong to systemd and man-db's packages, not to spotguard.
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION
    /usr/lib/systemd /usr/lib/systemd/system /usr/share/man /usr/share/man/man1)
include(CPack)

// A file:// store in a temporary directory and a FakeClock set to now: the
// ground most tests of the snapshot data path stand on.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "agent/repo/snapshot_writer.h"
#include "common/file_store.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/fake_clock.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The file store dates objects by real mtimes; gc compares them with this clock.
    clock_.SetNow(std::chrono::system_clock::now());
    auto opened = FileStore::Open(dir_.Join("store"));
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(*opened);
  }

  // Writes `tree` under a scratch dir and commits it as the next snapshot of
  // `request.job` ("job" when empty), with the rest of `request` as given.
  StatusOr<SnapshotResult> CommitTree(const Tree& tree, SnapshotRequest request = {},
                                      std::optional<int64_t> step = std::nullopt) {
    const std::string src = dir_.Join("src-" + std::to_string(++sources_));
    WriteTree(src, tree);
    if (request.job.empty()) request.job = "job";
    if (request.instance.empty()) request.instance = "i-test";
    SG_ASSIGN_OR_RETURN(CapturedCheckpoint capture, CaptureTree(src, step));
    SnapshotWriter writer(*store_, clock_, SnapshotOptions{});
    return writer.Write(capture, request);
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<FileStore> store_;
  int sources_ = 0;
};

}  // namespace sg::testing

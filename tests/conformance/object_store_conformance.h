// The contract of ObjectStore (common/object_store.h), written once and run
// against every backend: each test runner instantiates it with its stores.
//
//   INSTANTIATE_TEST_SUITE_P(File, ObjectStoreConformance,
//                            ::testing::Values(StoreFactory{"file", MakeFileStore}));
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "common/object_store.h"

namespace sg::testing {

struct StoreFactory {
  std::string name;
  // A store that may be shared with other tests; each test works under its
  // own random prefix, so stores on a shared bucket are fine.
  std::function<std::shared_ptr<ObjectStore>()> make;
};

inline std::string PrintToString(const StoreFactory& f) { return f.name; }

class ObjectStoreConformance : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::string Key(const std::string& name) const { return prefix_ + name; }

  std::shared_ptr<ObjectStore> store_;
  std::string prefix_;
};

}  // namespace sg::testing

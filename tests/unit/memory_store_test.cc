// The in-memory store of the fake multi-node world keeps ObjectStore's
// contracts: the conformance suite, as for file:// and S3.
#include "tests/support/memory_store.h"

#include <gtest/gtest.h>

#include "tests/conformance/object_store_conformance.h"

namespace sg::testing {
namespace {

std::shared_ptr<ObjectStore> MakeMemoryStore() {
  static auto* shared = new std::shared_ptr<ObjectStore>(std::make_shared<MemoryStore>());  // NOLINT
  return *shared;
}

INSTANTIATE_TEST_SUITE_P(Memory, ObjectStoreConformance,
                         ::testing::Values(StoreFactory{"memory", MakeMemoryStore}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace sg::testing

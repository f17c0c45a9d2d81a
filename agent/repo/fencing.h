// Fencing tokens that readers enforce (docs/design.md, "Fencing").
//
// The lease (agent/repo/lease.h) decides who may write; it cannot stop a write
// that the previous holder sent before it lost the lease and that lands
// later (a partition, a stopped process, a retried PUT). So every holder,
// right after taking generation G and before it restores or commits
// anything, records a fence:
//
//   <job>/fences/<G, 10 digits>-<S, 10 digits>     (create-only)
//
// where S is the newest snapshot seq the job's history held at that moment.
// Readers then admit a manifest of generation g at seq s only when every
// fence of a later generation G > g has s <= S: a writer of an older
// generation cannot add to the history once a newer generation has drawn
// its line, however late its requests land. Fences hold their data in the
// key (Fence, FenceKey in agent/repo/store_layout.h), so one LIST reads them all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/repo/store_layout.h"
#include "common/object_store.h"

namespace sg {

class FenceTable {
 public:
  FenceTable() = default;
  explicit FenceTable(std::vector<Fence> fences);

  // One LIST of <job>/fences/. Keys that are not fences are ignored.
  static StatusOr<FenceTable> Read(ObjectStore& store, const std::string& job);

  // The fence that keeps a manifest of `generation` at `seq` out of the
  // history, if any (the one of the lowest generation).
  std::optional<Fence> Excluding(uint64_t seq, uint64_t generation) const;
  bool Admits(uint64_t seq, uint64_t generation) const { return !Excluding(seq, generation); }
  // Seqs up to this are admitted whatever their generation (no GET needed).
  uint64_t AdmitsAnyUpTo() const;
  bool empty() const { return fences_.empty(); }

 private:
  std::vector<Fence> fences_;  // ascending generation
};

// Draws the line of lease generation `generation`, which the caller has just
// taken: the newest seq of the job's history now (after the fences already
// there). REQUIRES: that generation of the lease is held, and nothing has
// been restored or committed under it yet.
StatusOr<Fence> DrawFence(ObjectStore& store, const std::string& job, uint64_t generation,
                          const std::string& instance, const std::string& time);
// The same from the history the caller listed after taking the lease
// (`newest_seq`: its newest admitted seq, 0 when empty), which it then
// restores from: the start lists the history once (docs/design.md §6).
StatusOr<Fence> DrawFenceAfter(ObjectStore& store, const std::string& job, uint64_t generation,
                               uint64_t newest_seq, const std::string& instance,
                               const std::string& time);

// Writes generation `fence.generation`'s line. REQUIRES: that generation of
// the lease is held. A fence already there for the generation (a retried
// write whose answer was lost) is fine when it is the same line.
Status WriteFence(ObjectStore& store, const std::string& job, const Fence& fence,
                  const std::string& body);

// The generation of the job's lease as it is now (0 when there is none): what
// a snapshot written outside the agent (`spotguard snapshot`) carries, so
// that the fences of later generations judge it like the holder's own.
StatusOr<uint64_t> LeaseGenerationNow(ObjectStore& store, const std::string& job);

}  // namespace sg

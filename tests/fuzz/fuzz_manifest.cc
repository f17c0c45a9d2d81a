// libFuzzer target: agent/manifest ParseManifest on arbitrary bytes.
// Properties checked beyond "no crash, no sanitizer report":
//  - a manifest that parses has only paths CheckRelativePath accepts, file
//    keys inside its snapshot, frame keys inside the job's snapshots no later
//    than its own, and frame counts/sizes/offsets that add up;
//  - it survives ManifestToJson -> ParseManifest unchanged.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/repo/manifest.h"
#include "agent/repo/store_layout.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // The fixed job and seq of the seeds; other values only make more inputs fail early.
  auto m = sg::ParseManifest(text, "job", 7);
  if (!m.ok()) return 0;
  const std::string key_prefix = "snapshots/" + sg::SeqName(7) + "/files/";
  for (const sg::ManifestFile& f : m->files) {
    SG_FUZZ_CHECK(sg::CheckRelativePath(f.path).ok(), "accepted a bad path");
    SG_FUZZ_CHECK(f.key.starts_with(key_prefix), "accepted a key outside the snapshot");
    SG_FUZZ_CHECK(f.frame_size > 0, "accepted frame size 0");
    uint64_t stored = 0;
    for (const sg::FrameRef& r : f.frames) {
      stored += r.stored;
      if (m->format == 1) continue;
      const auto seq = sg::SeqOfDataKey(r.key);
      SG_FUZZ_CHECK(seq && *seq <= 7, "accepted a frame key outside the job's snapshots");
      SG_FUZZ_CHECK(sg::CheckRelativePath(r.key).ok(), "accepted a bad frame key");
      SG_FUZZ_CHECK(r.offset + r.stored >= r.offset, "accepted an overflowing frame");
      SG_FUZZ_CHECK(r.sha256.size() == 64, "accepted a frame without its sha256");
    }
    SG_FUZZ_CHECK(stored == f.stored_size, "frames do not add up to stored_size");
    uint64_t raw = 0;
    for (size_t i = 0; i < f.frames.size(); ++i) raw += f.FrameRawSize(i);
    SG_FUZZ_CHECK(raw == f.size, "frames do not cover the file");
  }
  if (!m->resume.empty())
    SG_FUZZ_CHECK(sg::CheckRelativePath(m->resume).ok(), "accepted a bad resume");
  const std::string again = sg::ManifestToJson(*m).dump();
  auto m2 = sg::ParseManifest(again, "job", 7);
  SG_FUZZ_CHECK(m2.ok(), "round trip does not parse");
  SG_FUZZ_CHECK(sg::ManifestToJson(*m2).dump() == again, "round trip changed the manifest");
  return 0;
}

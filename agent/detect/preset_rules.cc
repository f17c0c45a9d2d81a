// The preset rules, one function a format: caffe, files matched by patterns
// (pytorch, lightning, generic), huggingface, dcp and tensorflow; each adds
// the complete checkpoints in a listing. docs/checkpoints.md describes them.
#include "agent/detect/preset_rules.h"

#include <fnmatch.h>

#include <algorithm>
#include <charconv>
#include <regex>

#include "agent/detect/checkpoint_relpath.h"
#include "common/files.h"

namespace sg::preset_detail {
namespace {

constexpr uint64_t kMaxIndexFileBytes = 1 << 20;
constexpr std::string_view kHfTrainerState = "trainer_state.json";
constexpr std::string_view kTfIndexFile = "checkpoint";

Checkpoint MakeCheckpoint(std::string id, std::optional<int64_t> step,
                          std::vector<const ListedFile*> files, std::string resume) {
  Checkpoint c;
  c.id = std::move(id);
  c.step = step;
  c.resume = std::move(resume);
  for (const ListedFile* f : files) {
    c.relpaths.push_back(f->relpath);
    c.newest_mtime = std::max(c.newest_mtime, f->mtime);
  }
  std::sort(c.relpaths.begin(), c.relpaths.end());
  c.relpaths.erase(std::unique(c.relpaths.begin(), c.relpaths.end()), c.relpaths.end());
  return c;
}

bool MatchesAny(const std::vector<std::string>& patterns, const std::string& relpath) {
  const std::string base(BaseName(relpath));
  for (const std::string& pat : patterns) {
    const bool has_slash = pat.find('/') != std::string::npos;
    const int flags = FNM_PERIOD | (has_slash ? FNM_PATHNAME : 0);
    if (::fnmatch(pat.c_str(), has_slash ? relpath.c_str() : base.c_str(), flags) == 0) {
      return true;
    }
  }
  return false;
}

// Every directory below checkpoint_dir that holds a listed file.
std::set<std::string> AncestorDirs(const Listing& listing) {
  std::set<std::string> dirs;
  for (const ListedFile& f : listing.files()) {
    std::string_view dir = ParentOf(f.relpath);
    while (!dir.empty()) {
      if (!dirs.insert(std::string(dir)).second) break;
      dir = ParentOf(dir);
    }
  }
  return dirs;
}

// The value of the first `key: "..."` line of a CheckpointState text proto.
std::optional<std::string> TextProtoString(std::string_view text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
    pos = eol == std::string_view::npos ? text.size() : eol + 1;
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos) continue;
    line.remove_prefix(first);
    if (!line.starts_with(key)) continue;
    line.remove_prefix(key.size());
    first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] != ':') continue;
    line.remove_prefix(first + 1);
    size_t quote = line.find('"');
    if (quote == std::string_view::npos) continue;
    std::string value;
    for (size_t i = quote + 1; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) {
        value += line[++i];
      } else if (line[i] == '"') {
        return value;
      } else {
        value += line[i];
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> ParseDigits(std::string_view digits) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

// caffe: <prefix>_iter_N.caffemodel[.h5] + <prefix>_iter_N.solverstate[.h5],
// the solverstate written after the model (Solver::Snapshot writes the model
// first, then the solver state, both in place).
void DetectCaffe(const Listing& listing, std::vector<Checkpoint>& out) {
  static const std::regex kName(R"(^(.+)_iter_([0-9]+)\.(caffemodel|solverstate)(\.h5)?$)");
  struct Pair {
    std::string id;
    std::optional<int64_t> iter;
    const ListedFile* model = nullptr;
    const ListedFile* state = nullptr;
  };
  std::map<std::pair<std::string, bool>, Pair> pairs;  // by id and HDF5-ness
  for (const ListedFile* f : listing.FilesUnder("")) {
    const std::string base(BaseName(f->relpath));
    std::smatch m;
    if (!std::regex_match(base, m, kName)) continue;
    const std::string id = JoinRel(ParentOf(f->relpath), m[1].str() + "_iter_" + m[2].str());
    Pair& p = pairs[{id, m[4].matched}];
    p.id = id;
    p.iter = ParseDigits(m[2].str());
    (m[3] == "caffemodel" ? p.model : p.state) = f;
  }
  for (const auto& [key, p] : pairs) {
    if (p.model == nullptr || p.state == nullptr) continue;
    if (!listing.IsSettledFile(p.model->relpath) || !listing.IsSettledFile(p.state->relpath)) {
      continue;
    }
    // A model rewritten after its solver state (a second snapshot of the same
    // iteration in progress) does not pair with the old state.
    if (p.state->mtime < p.model->mtime) continue;
    out.push_back(MakeCheckpoint(p.id, p.iter, {p.model, p.state}, p.state->relpath));
  }
}

// pytorch, lightning, generic: every matching file is a checkpoint of its
// own, except that files below a directory whose name carries a step
// ("step_100/model.pt", "step_100/optim.pt") form one checkpoint together.
void DetectFiles(const Listing& listing, const std::vector<std::string>& patterns,
                 std::vector<Checkpoint>& out) {
  struct Group {
    std::optional<int64_t> step;
    std::vector<const ListedFile*> files;
  };
  std::map<std::string, Group> step_dirs;
  for (const ListedFile* f : listing.FilesUnder("")) {
    if (!MatchesAny(patterns, f->relpath)) continue;
    std::optional<int64_t> step = ParseStep(BaseName(f->relpath));
    if (step) {
      if (listing.IsSettledFile(f->relpath)) {
        out.push_back(MakeCheckpoint(f->relpath, step, {f}, f->relpath));
      }
      continue;
    }
    // The nearest directory that names a step.
    std::string_view dir = ParentOf(f->relpath);
    while (!dir.empty() && !ParseStep(BaseName(dir))) dir = ParentOf(dir);
    if (dir.empty()) {
      if (listing.IsSettledFile(f->relpath)) {
        out.push_back(MakeCheckpoint(f->relpath, std::nullopt, {f}, f->relpath));
      }
      continue;
    }
    Group& g = step_dirs[std::string(dir)];
    g.step = ParseStep(BaseName(dir));
    g.files.push_back(f);
  }
  for (auto& [dir, g] : step_dirs) {
    const bool settled = std::all_of(g.files.begin(), g.files.end(), [&](const ListedFile* f) {
      return listing.IsSettledFile(f->relpath);
    });
    if (settled) out.push_back(MakeCheckpoint(dir, g.step, g.files, dir));
  }
}

// huggingface: checkpoint-N/ with trainer_state.json written and closed, and
// nothing inside still being written.
void DetectHuggingface(const Listing& listing, std::vector<Checkpoint>& out) {
  static const std::regex kDir(R"(^checkpoint-([0-9]+)$)");
  for (const std::string& dir : AncestorDirs(listing)) {
    const std::string base(BaseName(dir));
    std::smatch m;
    if (!std::regex_match(base, m, kDir)) continue;
    if (!listing.IsSettledFile(JoinRel(dir, kHfTrainerState))) continue;
    std::vector<const ListedFile*> files = listing.FilesUnder(dir);
    if (std::any_of(files.begin(), files.end(),
                    [&](const ListedFile* f) { return listing.IsUnsettled(f->relpath); })) {
      continue;
    }
    out.push_back(MakeCheckpoint(dir, ParseDigits(m[1].str()), std::move(files), dir));
  }
}

// dcp: a directory holding .metadata, which torch.distributed.checkpoint
// writes (to ".metadata.tmp", then renames) only after every shard is done.
std::vector<std::string> DcpNodeMarkers(int node_rank) {
  const std::string base = "node_" + std::to_string(node_rank);
  return {base + ".done", base + ".json"};
}

void DetectDcp(const Listing& listing, std::optional<int> node_rank, std::vector<Checkpoint>& out) {
  // Each directory with its newest marker: `.metadata`, or on a rank other
  // than 0 this node's marker. Newest, because a save into the directory
  // writes its own marker last: an older marker there (the `.metadata` that
  // a restore added from rank 0's part) describes another save.
  const std::vector<std::string> node_markers =
      node_rank && *node_rank != 0 ? DcpNodeMarkers(*node_rank) : std::vector<std::string>{};
  std::map<std::string, const ListedFile*> marker_of;
  for (const ListedFile& f : listing.files()) {
    if (f.is_symlink) continue;
    const std::string_view base = BaseName(f.relpath);
    const bool node_marker =
        std::find(node_markers.begin(), node_markers.end(), base) != node_markers.end() &&
        !listing.HasTempComponent(f.relpath);
    if (base != kDcpMetadata && !node_marker) continue;
    const ListedFile*& marker = marker_of[std::string(ParentOf(f.relpath))];
    if (marker == nullptr || f.mtime > marker->mtime) marker = &f;
  }
  for (const auto& [dir, meta] : marker_of) {
    if (!listing.IsSettledFile(meta->relpath)) continue;
    std::vector<const ListedFile*> files;
    bool complete = true;
    for (const ListedFile* f : listing.FilesUnder(dir)) {
      // Files of a DCP checkpoint nested below this one belong to that one.
      bool nested = false;
      for (std::string_view p = ParentOf(f->relpath); p != dir && !p.empty(); p = ParentOf(p)) {
        if (marker_of.count(std::string(p))) nested = true;
      }
      if (nested) continue;
      // A shard newer than the marker is a save into the same directory in
      // progress: the old marker does not describe it.
      if (listing.IsUnsettled(f->relpath) || f->mtime > meta->mtime) complete = false;
      files.push_back(f);
    }
    if (!complete) continue;
    const std::string id = dir.empty() ? "." : dir;
    std::optional<int64_t> step = dir.empty() ? std::nullopt : ParseStep(BaseName(dir));
    out.push_back(MakeCheckpoint(id, step, std::move(files), id));
  }
}

// tensorflow: the `checkpoint` index names a prefix whose .index and every
// .data-NNNNN-of-MMMMM shard exist and are settled.
void DetectTensorflow(const Listing& listing, const std::string& checkpoint_dir,
                      std::vector<Checkpoint>& out) {
  static const std::regex kShard(R"(^\.data-([0-9]{5})-of-([0-9]{5})$)");
  for (const ListedFile* index : listing.FilesUnder("")) {
    if (BaseName(index->relpath) != kTfIndexFile) continue;
    if (!listing.IsSettledFile(index->relpath) || index->size > kMaxIndexFileBytes) continue;
    auto text = ReadFileToString(checkpoint_dir + "/" + index->relpath);
    if (!text.ok()) continue;
    std::optional<std::string> named = TextProtoString(*text, "model_checkpoint_path");
    if (!named || named->empty()) continue;
    const std::string_view index_dir = ParentOf(index->relpath);
    std::string prefix;
    if (named->starts_with('/')) {
      // Absolute paths (tf.compat.v1 Saver's default) inside checkpoint_dir
      // are taken as they are; others, as a name beside the index.
      prefix = named->starts_with(checkpoint_dir + "/") ? named->substr(checkpoint_dir.size() + 1)
                                                        : JoinRel(index_dir, BaseName(*named));
    } else {
      prefix = JoinRel(index_dir, *named);
    }
    std::optional<std::string> normalized = NormalizeRelative(prefix);
    if (!normalized || normalized->empty()) continue;
    prefix = *normalized;

    const ListedFile* tf_index = listing.Find(prefix + ".index");
    if (tf_index == nullptr || !listing.IsSettledFile(tf_index->relpath)) continue;
    std::vector<const ListedFile*> files = {index, tf_index};
    std::optional<int64_t> shard_count;
    std::set<int64_t> shards;
    bool complete = true;
    const std::string shard_stem = std::string(BaseName(prefix));
    for (const ListedFile* f : listing.FilesUnder(ParentOf(prefix))) {
      if (ParentOf(f->relpath) != ParentOf(prefix)) continue;
      std::string_view base = BaseName(f->relpath);
      if (!base.starts_with(shard_stem)) continue;
      const std::string rest(base.substr(shard_stem.size()));
      std::smatch m;
      if (rest == ".meta") {
        // tf.compat.v1 Saver writes the graph after the index; wait for it.
        if (listing.IsUnsettled(f->relpath)) complete = false;
        files.push_back(f);
        continue;
      }
      if (!std::regex_match(rest, m, kShard)) continue;
      auto i = ParseDigits(m[1].str());
      auto n = ParseDigits(m[2].str());
      if (!i || !n || (shard_count && *shard_count != *n)) {
        complete = false;
        break;
      }
      shard_count = n;
      shards.insert(*i);
      if (listing.IsUnsettled(f->relpath)) complete = false;
      files.push_back(f);
    }
    if (!complete || !shard_count || static_cast<int64_t>(shards.size()) != *shard_count ||
        *shards.begin() != 0 || *shards.rbegin() != *shard_count - 1) {
      continue;
    }
    static const std::regex kTrailingNumber(R"(-([0-9]+)$)");
    std::smatch m;
    std::optional<int64_t> step = std::regex_search(shard_stem, m, kTrailingNumber)
                                      ? ParseDigits(m[1].str())
                                      : ParseStep(shard_stem);
    out.push_back(MakeCheckpoint(prefix, step, std::move(files), prefix));
  }
}

}  // namespace sg::preset_detail

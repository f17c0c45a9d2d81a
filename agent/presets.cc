#include "agent/presets.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "common/files.h"

namespace sg {
namespace {

using Clock = std::chrono::system_clock;

constexpr uint64_t kMaxIndexFileBytes = 1 << 20;
constexpr std::string_view kDcpMetadata = ".metadata";
constexpr std::string_view kHfTrainerState = "trainer_state.json";
constexpr std::string_view kTfIndexFile = "checkpoint";

std::string_view BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// "" for a path directly in checkpoint_dir.
std::string_view ParentOf(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

std::string JoinRel(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  return std::string(dir) + "/" + std::string(name);
}

bool IsUnder(std::string_view path, std::string_view dir) {
  if (dir.empty()) return true;
  return path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/';
}

// Lexically normalizes a relative path; nullopt when it climbs out.
std::optional<std::string> NormalizeRelative(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string_view part = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part == "..") {
      if (parts.empty()) return std::nullopt;
      parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  std::string out;
  for (std::string_view p : parts) {
    if (!out.empty()) out += '/';
    out += p;
  }
  return out;
}

Clock::time_point ToTimePoint(const struct timespec& ts) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

Status ListInto(const std::string& root, const std::string& rel, std::vector<ListedFile>& out) {
  const std::string dir_path = rel.empty() ? root : root + "/" + rel;
  DIR* dir = ::opendir(dir_path.c_str());
  if (dir == nullptr) {
    // A subdirectory removed while listing is simply gone.
    if (!rel.empty() && (errno == ENOENT || errno == ENOTDIR)) return Status::Ok();
    return Status::FromErrno(errno, "list " + dir_path);
  }
  std::vector<std::string> subdirs;
  Status status;
  while (true) {
    errno = 0;
    struct dirent* entry = ::readdir(dir);
    if (entry == nullptr) {
      if (errno != 0) status = Status::FromErrno(errno, "list " + dir_path);
      break;
    }
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string child = JoinRel(rel, name);
    if (IsAgentPrivatePath(child)) continue;
    struct stat st {};
    if (::lstat((root + "/" + child).c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      status = Status::FromErrno(errno, "stat " + root + "/" + child);
      break;
    }
    if (S_ISDIR(st.st_mode)) {
      subdirs.push_back(child);
      continue;
    }
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) continue;
    ListedFile f;
    f.relpath = child;
    f.is_symlink = S_ISLNK(st.st_mode);
    f.size = static_cast<uint64_t>(st.st_size);
    f.mode = st.st_mode & 07777;
    f.mtime = ToTimePoint(st.st_mtim);
    if (f.is_symlink) {
      std::string target(4096, '\0');
      ssize_t n = ::readlink((root + "/" + child).c_str(), target.data(), target.size());
      if (n > 0) {
        target.resize(static_cast<size_t>(n));
        std::string joined;
        if (!target.starts_with('/')) {
          joined = JoinRel(ParentOf(child), target);
        } else if (target.starts_with(root + "/")) {
          joined = target.substr(root.size() + 1);
        }
        if (!joined.empty()) f.symlink_target = NormalizeRelative(joined).value_or("");
      }
    }
    out.push_back(std::move(f));
  }
  ::closedir(dir);
  SG_RETURN_IF_ERROR(status);
  for (const std::string& sub : subdirs) SG_RETURN_IF_ERROR(ListInto(root, sub, out));
  return Status::Ok();
}

// Everything the rules need about the listing.
class Listing {
 public:
  Listing(const std::vector<ListedFile>& files, const std::set<std::string>& unsettled)
      : files_(files), unsettled_(unsettled) {
    for (const ListedFile& f : files) by_path_[f.relpath] = &f;
  }
  const std::vector<ListedFile>& files() const { return files_; }
  const ListedFile* Find(const std::string& relpath) const {
    auto it = by_path_.find(relpath);
    return it == by_path_.end() ? nullptr : it->second;
  }
  // A regular file that is not being written and has been left alone for the
  // settle time.
  bool IsSettledFile(const std::string& relpath) const {
    const ListedFile* f = Find(relpath);
    return f != nullptr && !f->is_symlink && unsettled_.count(relpath) == 0;
  }
  bool IsUnsettled(const std::string& relpath) const { return unsettled_.count(relpath) != 0; }
  // Regular, non-temporary files below `dir` ("" for all).
  std::vector<const ListedFile*> FilesUnder(std::string_view dir) const {
    std::vector<const ListedFile*> out;
    for (const ListedFile& f : files_) {
      if (!f.is_symlink && IsUnder(f.relpath, dir) && !HasTempComponent(f.relpath)) {
        out.push_back(&f);
      }
    }
    return out;
  }
  static bool HasTempComponent(std::string_view relpath) {
    size_t start = 0;
    while (true) {
      size_t slash = relpath.find('/', start);
      if (slash == std::string_view::npos) return IsTempName(relpath.substr(start));
      std::string_view dir = relpath.substr(start, slash - start);
      if (dir.starts_with('.') || IsTempName(dir)) return true;
      start = slash + 1;
    }
  }

 private:
  const std::vector<ListedFile>& files_;
  const std::set<std::string>& unsettled_;
  std::map<std::string, const ListedFile*, std::less<>> by_path_;
};

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
void DetectDcp(const Listing& listing, std::vector<Checkpoint>& out) {
  std::set<std::string> dcp_dirs;
  for (const ListedFile& f : listing.files()) {
    if (!f.is_symlink && BaseName(f.relpath) == kDcpMetadata) {
      dcp_dirs.insert(std::string(ParentOf(f.relpath)));
    }
  }
  for (const std::string& dir : dcp_dirs) {
    const std::string metadata = JoinRel(dir, kDcpMetadata);
    if (!listing.IsSettledFile(metadata)) continue;
    const ListedFile* meta = listing.Find(metadata);
    std::vector<const ListedFile*> files;
    bool complete = true;
    for (const ListedFile* f : listing.FilesUnder(dir)) {
      // Files of a DCP checkpoint nested below this one belong to that one.
      bool nested = false;
      for (std::string_view p = ParentOf(f->relpath); p != dir && !p.empty(); p = ParentOf(p)) {
        if (dcp_dirs.count(std::string(p))) nested = true;
      }
      if (nested) continue;
      // A shard newer than .metadata is a save into the same directory in
      // progress: the old .metadata does not describe it.
      if (listing.IsUnsettled(f->relpath) || f->mtime > meta->mtime) complete = false;
      files.push_back(f);
    }
    if (!complete) continue;
    const std::string id = dir.empty() ? "." : dir;
    std::optional<int64_t> step = dir.empty() ? std::nullopt : ParseStep(BaseName(dir));
    out.push_back(MakeCheckpoint(id, step, std::move(files), id));
  }
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

}  // namespace

StatusOr<std::vector<ListedFile>> ListCheckpointDir(const std::string& dir) {
  std::vector<ListedFile> out;
  std::string root = dir;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  SG_RETURN_IF_ERROR(ListInto(root, "", out));
  std::sort(out.begin(), out.end(),
            [](const ListedFile& a, const ListedFile& b) { return a.relpath < b.relpath; });
  return out;
}

std::optional<int64_t> ParseStep(std::string_view name) {
  static const std::regex kStep(
      R"((?:^|[^A-Za-z0-9])(?:global_step|step|iteration|iter)[_=-]?([0-9]+)(?![0-9]))");
  const std::string s(name);
  std::optional<int64_t> found;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), kStep); it != std::sregex_iterator();
       ++it) {
    if (auto v = ParseDigits((*it)[1].str())) found = v;
  }
  return found;
}

bool IsTempName(std::string_view basename) {
  if (basename == kDcpMetadata) return false;
  if (basename.empty() || basename.starts_with('.') || basename.ends_with('~')) return true;
  static const std::regex kTempSuffix(R"(\.(tmp|temp|part|partial)([._-]?[A-Za-z0-9]+)?$)",
                                      std::regex::icase);
  static const std::regex kPythonTempfile(R"(^tmp[a-z0-9_]{8}(\..*)?$)");
  const std::string s(basename);
  return std::regex_search(s, kTempSuffix) || std::regex_match(s, kPythonTempfile);
}

std::chrono::nanoseconds DefaultSettleTime(Preset preset) {
  switch (preset) {
    case Preset::kPytorch:
    case Preset::kLightning:
    case Preset::kGeneric:
      return std::chrono::seconds(10);
    case Preset::kCaffe:
    case Preset::kHuggingface:
    case Preset::kTensorflow:
    case Preset::kDcp:
      return std::chrono::seconds(2);
  }
  return std::chrono::seconds(10);
}

std::chrono::nanoseconds SettleTime(const Config& config) {
  if (config.settle_time) return *config.settle_time;
  return DefaultSettleTime(config.preset);
}

CheckpointDetector::CheckpointDetector(std::string checkpoint_dir, Preset preset,
                                       std::vector<std::string> patterns)
    : checkpoint_dir_(std::move(checkpoint_dir)), preset_(preset), patterns_(std::move(patterns)) {
  while (checkpoint_dir_.size() > 1 && checkpoint_dir_.back() == '/') checkpoint_dir_.pop_back();
}

CheckpointDetector CheckpointDetector::ForConfig(const Config& config) {
  return CheckpointDetector(config.checkpoint_dir, config.preset, config.patterns);
}

// Whether a serialized tensor file is whole, for the formats whose end can
// be recognised: torch.save's zip (the end-of-central-directory record must
// be there) and safetensors (header length + JSON header + the data it
// describes must add up to the file size). Other files pass.
bool LooksWhole(const std::string& path, uint64_t size) {
  // A file that cannot be read now is judged by the capture, which fails
  // cleanly when it has vanished.
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) return true;
  auto head = PreadUpTo(fd->get(), 0, 8, path);
  if (!head.ok()) return true;
  if (head->size() >= 4 && head->compare(0, 4, "PK\x03\x04") == 0) {
    // EOCD: 22 bytes plus a comment of at most 65535 bytes at the end.
    const uint64_t tail = std::min<uint64_t>(size, 22 + 65535);
    auto end = PreadUpTo(fd->get(), size - tail, tail, path);
    return end.ok() && end->rfind("PK\x05\x06") != std::string::npos &&
           end->size() - end->rfind("PK\x05\x06") >= 22;
  }
  if (path.ends_with(".safetensors") && head->size() == 8) {
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i)
      header_len = (header_len << 8) | static_cast<unsigned char>((*head)[i]);
    if (header_len > size - 8) return false;
    auto header = PreadUpTo(fd->get(), 8, header_len, path);
    if (!header.ok()) return false;
    auto j = nlohmann::json::parse(*header, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return false;
    uint64_t data_end = 0;
    for (const auto& [name, t] : j.items()) {
      if (name == "__metadata__" || !t.is_object() || !t.contains("data_offsets")) continue;
      const auto& off = t["data_offsets"];
      if (off.is_array() && off.size() == 2 && off[1].is_number_unsigned()) {
        data_end = std::max(data_end, off[1].get<uint64_t>());
      }
    }
    return 8 + header_len + data_end == size;
  }
  return true;
}

std::vector<Checkpoint> CheckpointDetector::Detect(const std::vector<ListedFile>& files,
                                                   const std::set<std::string>& unsettled) const {
  Listing listing(files, unsettled);
  std::vector<Checkpoint> out;
  switch (preset_) {
    case Preset::kCaffe:
      DetectCaffe(listing, out);
      break;
    case Preset::kPytorch:
    case Preset::kLightning:
    case Preset::kGeneric:
      DetectFiles(listing, patterns_, out);
      if (preset_ != Preset::kGeneric) {
        // A trainer killed in the middle of torch.save leaves a file that
        // looks settled; its format shows it is not whole.
        std::map<std::string, uint64_t> sizes;
        for (const ListedFile& f : files) sizes[f.relpath] = f.size;
        std::erase_if(out, [&](const Checkpoint& c) {
          return std::any_of(c.relpaths.begin(), c.relpaths.end(), [&](const std::string& rel) {
            return !LooksWhole(checkpoint_dir_ + "/" + rel, sizes[rel]);
          });
        });
      }
      break;
    case Preset::kHuggingface:
      DetectHuggingface(listing, out);
      break;
    case Preset::kDcp:
      DetectDcp(listing, out);
      break;
    case Preset::kTensorflow:
      DetectTensorflow(listing, checkpoint_dir_, out);
      break;
  }
  SortNewestFirst(out);
  return out;
}

}  // namespace sg

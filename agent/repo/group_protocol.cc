// The round protocol's records (docs/design.md §14, docs/format.md): each
// one to JSON and back, a record that does not parse named by `what`.
#include "agent/repo/group_protocol.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/config/config.h"
#include "common/crypto.h"
#include "common/strings.h"

namespace sg {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// Parses `text` as a JSON object and hands it to `read`, turning nlohmann's
// type errors into a Corruption that names `what`.
template <typename T, typename Fn>
StatusOr<T> ParseObject(std::string_view text, const std::string& what, Fn read) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::Corruption(what + ": not a JSON object");
  try {
    T out = read(j);
    return out;
  } catch (const json::exception& e) {
    return Status::Corruption(what + ": missing or mistyped field: " + e.what());
  } catch (const std::invalid_argument& e) {
    return Status::Corruption(what + ": " + e.what());
  }
}

uint64_t Whole(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number_unsigned()) {
    throw std::invalid_argument(std::string("\"") + key + "\" is not a whole number >= 0");
  }
  return v.get<uint64_t>();
}

int SmallInt(const json& j, const char* key, int min, int max) {
  const uint64_t v = Whole(j, key);
  if (v < static_cast<uint64_t>(min) || v > static_cast<uint64_t>(max)) {
    throw std::invalid_argument(std::string("\"") + key + "\" is out of range: " +
                                std::to_string(v));
  }
  return static_cast<int>(v);
}

std::string NonEmpty(const json& j, const char* key) {
  std::string s = j.at(key).get<std::string>();
  if (s.empty()) throw std::invalid_argument(std::string("\"") + key + "\" is empty");
  return s;
}

}  // namespace

std::optional<int> RoundPlan::RankOf(const std::string& agent) const {
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].agent == agent) return static_cast<int>(i);
  }
  return std::nullopt;
}

uint64_t GroupCommit::Bytes() const {
  uint64_t n = 0;
  for (const PartRecord& p : parts) n += p.bytes;
  return n;
}

uint64_t GroupCommit::Stored() const {
  uint64_t n = 0;
  for (const PartRecord& p : parts) n += p.stored;
  return n;
}

std::string MemberToJson(const MemberRecord& m) {
  ojson j;
  j["instance"] = m.instance;
  j["agent"] = m.agent;
  j["address"] = m.address;
  j["job"] = m.job;
  j["nodes"] = m.nodes;
  j["command"] = m.command;
  if (!m.command_digest.empty()) j["command_sha256"] = m.command_digest;
  j["beat"] = m.beat;
  return j.dump();
}

StatusOr<MemberRecord> ParseMember(std::string_view text, const std::string& what) {
  return ParseObject<MemberRecord>(text, what, [](const json& j) {
    MemberRecord m;
    m.instance = NonEmpty(j, "instance");
    m.agent = NonEmpty(j, "agent");
    m.address = NonEmpty(j, "address");
    m.job = NonEmpty(j, "job");
    m.nodes = SmallInt(j, "nodes", 1, 1024);
    m.command = j.at("command").get<std::vector<std::string>>();
    // A record of an agent before command_sha256 holds its command unredacted.
    m.command_digest = j.contains("command_sha256") ? NonEmpty(j, "command_sha256")
                                                    : CommandDigest(m.job, m.command);
    // Stored redacted from now on, whatever an older record held.
    m.command = RedactArgs(m.command);
    m.beat = Whole(j, "beat");
    return m;
  });
}

std::string PlanToJson(const RoundPlan& p) {
  ojson j;
  j["round"] = p.round;
  j["nodes"] = p.nodes;
  j["generation"] = p.generation;
  j["port"] = p.port;
  j["members"] = ojson::array();
  for (const PlanMember& m : p.members) {
    j["members"].push_back({{"instance", m.instance}, {"agent", m.agent}, {"address", m.address}});
  }
  j["resume_seq"] = p.resume_seq ? ojson(*p.resume_seq) : ojson(nullptr);
  j["resume_step"] = p.resume_step ? ojson(*p.resume_step) : ojson(nullptr);
  return j.dump();
}

StatusOr<RoundPlan> ParsePlan(std::string_view text, const std::string& what) {
  return ParseObject<RoundPlan>(text, what, [](const json& j) {
    RoundPlan p;
    p.round = Whole(j, "round");
    p.nodes = SmallInt(j, "nodes", 1, 1024);
    p.generation = Whole(j, "generation");
    p.port = SmallInt(j, "port", 1, 65535);
    std::set<std::string> agents;
    for (const json& m : j.at("members")) {
      PlanMember pm{NonEmpty(m, "instance"), NonEmpty(m, "agent"), NonEmpty(m, "address")};
      if (!agents.insert(pm.agent).second) {
        throw std::invalid_argument("agent " + pm.agent + " is listed twice");
      }
      p.members.push_back(std::move(pm));
    }
    if (static_cast<int>(p.members.size()) != p.nodes) {
      throw std::invalid_argument("lists " + std::to_string(p.members.size()) +
                                  " members for " + std::to_string(p.nodes) + " nodes");
    }
    if (!j.at("resume_seq").is_null()) p.resume_seq = Whole(j, "resume_seq");
    if (!j.at("resume_step").is_null()) p.resume_step = j.at("resume_step").get<int64_t>();
    return p;
  });
}

std::string RoundEndToJson(const RoundEnd& e) {
  ojson j;
  j["reason"] = e.reason;
  j["by"] = e.by;
  j["detail"] = e.detail;
  return j.dump();
}

StatusOr<RoundEnd> ParseRoundEnd(std::string_view text, const std::string& what) {
  return ParseObject<RoundEnd>(text, what, [](const json& j) {
    return RoundEnd{NonEmpty(j, "reason"), NonEmpty(j, "by"), j.value("detail", "")};
  });
}

namespace {

ojson PartJson(const PartRecord& p) {
  return {{"rank", p.rank},         {"step", p.step},    {"seq", p.seq},
          {"instance", p.instance}, {"bytes", p.bytes}, {"stored", p.stored}};
}

PartRecord PartOf(const json& j) {
  PartRecord p;
  p.rank = SmallInt(j, "rank", 0, 1023);
  p.step = j.at("step").get<int64_t>();
  p.seq = Whole(j, "seq");
  p.instance = NonEmpty(j, "instance");
  p.bytes = Whole(j, "bytes");
  p.stored = Whole(j, "stored");
  return p;
}

}  // namespace

std::string PartToJson(const PartRecord& p) { return PartJson(p).dump(); }

StatusOr<PartRecord> ParsePart(std::string_view text, const std::string& what) {
  return ParseObject<PartRecord>(text, what, PartOf);
}

std::string GroupCommitToJson(const GroupCommit& g) {
  ojson j;
  j["format"] = "spotguard-group/1";
  j["seq"] = g.seq;
  j["round"] = g.round;
  j["nodes"] = g.nodes;
  j["step"] = g.step;
  j["generation"] = g.generation;
  j["created"] = g.created;
  j["parts"] = ojson::array();
  for (const PartRecord& p : g.parts) j["parts"].push_back(PartJson(p));
  return j.dump();
}

StatusOr<GroupCommit> ParseGroupCommit(std::string_view text, const std::string& what) {
  return ParseObject<GroupCommit>(text, what, [](const json& j) {
    if (j.value("format", "") != "spotguard-group/1") {
      throw std::invalid_argument("format is not \"spotguard-group/1\"");
    }
    GroupCommit g;
    g.seq = Whole(j, "seq");
    g.round = Whole(j, "round");
    g.nodes = SmallInt(j, "nodes", 1, 1024);
    g.step = j.at("step").get<int64_t>();
    g.generation = Whole(j, "generation");
    g.created = NonEmpty(j, "created");
    for (const json& p : j.at("parts")) g.parts.push_back(PartOf(p));
    // One part per rank, in rank order, all of the same step.
    if (static_cast<int>(g.parts.size()) != g.nodes) {
      throw std::invalid_argument("has " + std::to_string(g.parts.size()) + " parts for " +
                                  std::to_string(g.nodes) + " nodes");
    }
    for (size_t r = 0; r < g.parts.size(); ++r) {
      if (g.parts[r].rank != static_cast<int>(r) || g.parts[r].step != g.step) {
        throw std::invalid_argument("part " + std::to_string(r) +
                                    " is not rank " + std::to_string(r) + " of step " +
                                    std::to_string(g.step));
      }
    }
    return g;
  });
}

}  // namespace sg

// Figures a reliability test writes down: how many trials it ran, which
// faults it injected and what came of them. scripts/reliability-report.py
// turns the records of a run into the table in docs/reliability.md.
//
// Each test writes one JSON file, <SPOTGUARD_RELIABILITY_DIR>/<test>.json
// (scripts/test.sh sets the directory; without it nothing is written).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace sg::testing {

struct ReliabilityRecord {
  std::string test;    // short unique name, also the file name
  std::string area;    // "network", "crash", "resources", "time", "hostile", "fuzz", "secrets"
  std::string faults;  // what was injected, in words
  long trials = 0;     // independent trials (or fuzz executions)
  long faults_injected = 0;
  long committed = 0;  // snapshots committed
  long restored = 0;   // restores byte-identical to what was committed
  long lost = 0;       // committed data lost, overwritten or restored wrong: must be 0
  std::string detail;  // retry counts, errors seen, anything worth a reader's eye
};

// Writes the record if SPOTGUARD_RELIABILITY_DIR is set. Returns false only
// when the directory is set but the file cannot be written.
inline bool WriteReliabilityRecord(const ReliabilityRecord& r) {
  const char* dir = std::getenv("SPOTGUARD_RELIABILITY_DIR");
  if (dir == nullptr || *dir == '\0') return true;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  nlohmann::json j = {{"test", r.test},         {"area", r.area},
                      {"faults", r.faults},     {"trials", r.trials},
                      {"faults_injected", r.faults_injected},
                      {"committed", r.committed}, {"restored", r.restored},
                      {"lost", r.lost},         {"detail", r.detail}};
  std::ofstream out(std::filesystem::path(dir) / (r.test + ".json"));
  out << j.dump(2) << "\n";
  return static_cast<bool>(out);
}

// True when scripts/test.sh --long asked for the long variants.
inline bool LongReliabilityRun() {
  const char* v = std::getenv("SPOTGUARD_LONG_TESTS");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace sg::testing

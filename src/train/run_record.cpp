#include "ddp/train/run_record.hpp"

#include <cctype>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "ddp/train/config_changes.hpp"

namespace ddp::train {
namespace {

using json = nlohmann::ordered_json;  // keys in the order written, for people reading it

std::string format_time(std::time_t t, const char* format) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

}  // namespace

std::string to_json(const RunRecord& r) {
  json segments = json::array();
  for (const auto& s : r.segments)
    segments.push_back({{"segment", s.number},
                        {"start", s.start},
                        {"end", s.end},
                        {"world_size", s.world_size},
                        {"config_hash", s.config_hash},
                        {"resumed_from", s.resumed_from},
                        {"start_epoch", s.start_epoch},
                        {"start_step", s.start_step},
                        {"config_changes", s.config_changes},
                        {"exit", s.exit},
                        {"epochs_done", s.epochs_done}});
  json j = {{"run_id", r.run_id},
            {"status", r.status},
            {"config_hash", r.config_hash},
            {"epochs", r.epochs},
            {"epochs_done", r.epochs_done}};
  if (!r.init_from.empty()) j["init_from"] = r.init_from;  // fine-tuned runs only
  j["segments"] = segments;
  return j.dump(2) + "\n";
}

RunRecord parse_run_record(const std::string& text, const std::string& source) {
  try {
    const json j = json::parse(text);
    RunRecord r;
    r.run_id = j.at("run_id").get<std::string>();
    r.status = j.at("status").get<std::string>();
    r.config_hash = j.at("config_hash").get<std::string>();
    r.epochs = j.at("epochs").get<std::int64_t>();
    r.epochs_done = j.at("epochs_done").get<std::int64_t>();
    r.init_from = j.value("init_from", std::string());
    for (const auto& s : j.at("segments")) {
      RunSegment seg;
      seg.number = s.at("segment").get<std::int64_t>();
      seg.start = s.at("start").get<std::string>();
      seg.end = s.at("end").get<std::string>();
      seg.world_size = s.at("world_size").get<std::int64_t>();
      seg.config_hash = s.at("config_hash").get<std::string>();
      seg.resumed_from = s.at("resumed_from").get<std::string>();
      seg.start_epoch = s.at("start_epoch").get<std::int64_t>();
      seg.start_step = s.at("start_step").get<std::int64_t>();
      seg.config_changes = s.at("config_changes").get<std::vector<std::string>>();
      seg.exit = s.at("exit").get<std::string>();
      seg.epochs_done = s.at("epochs_done").get<std::int64_t>();
      r.segments.push_back(std::move(seg));
    }
    if (!is_valid_run_id(r.run_id))
      throw DataError("run_id '" + r.run_id + "' is not 1 to 64 of A-Z a-z 0-9 . _ -");
    return r;
  } catch (const json::exception& e) {
    throw DataError("'" + source + "' is not a readable run record (" + e.what() +
                    "): repair or remove it, or start over with --run.overwrite");
  } catch (const DataError& e) {
    throw DataError("'" + source + "' is not a readable run record (" + e.what() +
                    "): repair or remove it, or start over with --run.overwrite");
  }
}

std::optional<RunRecord> read_run_record(const std::filesystem::path& dir) {
  const auto file = dir / kRunRecordFile;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw DataError("cannot read '" + file.string() + "'");
  return parse_run_record(text.str(), file.string());
}

void write_run_record(const std::filesystem::path& dir, const RunRecord& r) {
  ckpt::write_file_atomically(dir / kRunRecordFile, to_json(r));
}

bool is_valid_run_id(const std::string& id) {
  if (id.empty() || id.size() > 64 || id == "." || id == "..") return false;
  for (const char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return false;
  return true;
}

std::string new_run_id() {
  std::random_device rd;
  char bits[16];
  std::snprintf(bits, sizeof bits, "%08x", static_cast<unsigned>(rd()));
  return format_time(std::time(nullptr), "%Y%m%d-%H%M%S-") + bits;
}

std::string utc_now() {
  return format_time(std::time(nullptr), "%Y-%m-%dT%H:%M:%SZ");
}

std::string config_hash(const std::string& resolved_toml) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (const auto& [key, value] : flatten_config(resolved_toml)) {
    if (is_invocation_key(key)) continue;
    for (const char c : key + "=" + value + "\n") {
      h ^= static_cast<unsigned char>(c);
      h *= 0x100000001b3ull;
    }
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace ddp::train

#include "durable_file.hpp"

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"

namespace ddp::ckpt {

bool is_temp_name(const std::string& name, long* pid) {
  const std::string marker = ".tmp.";
  const auto at = name.rfind(marker);
  // Snapshots and the run directory's other atomically written files (run.json, config.toml,
  // metrics.jsonl).
  const bool ours = name.rfind(".snapshot_", 0) == 0 || name.rfind(".run.json.", 0) == 0 ||
                    name.rfind(".config.toml.", 0) == 0 || name.rfind(".metrics.jsonl.", 0) == 0;
  if (!ours || at == std::string::npos) return false;
  const std::string digits = name.substr(at + marker.size());
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *pid = std::stol(digits);
  return true;
}

void write_file_atomically(const std::filesystem::path& file, const std::string& bytes) {
  const std::filesystem::path tmp = temp_path_for(file);
  std::string error = write_durably(tmp, bytes.data(), bytes.size());
  if (error.empty()) {
    std::error_code ec;
    std::filesystem::rename(tmp, file, ec);
    if (ec) error = "renaming " + tmp.filename().string() + ": " + ec.message();
  }
  if (error.empty()) {
    const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
    if (const int err = fsync_path(dir))
      error = "fsync of directory " + dir.string() + ": " + errno_text(err);
  }
  if (!error.empty()) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw SystemError("cannot write '" + file.string() + "': " + error);
  }
}

}  // namespace ddp::ckpt

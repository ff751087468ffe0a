// The run directory: snapshot names, the newest readable snapshot, keeping the last K, stale
// temporary files, and the up-front writability check.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <regex>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "durable_file.hpp"
#include "file_header.hpp"

namespace ddp::ckpt {
namespace {

namespace fs = std::filesystem;

struct Candidate {
  fs::path path;
  TrainingPosition position;
  std::string run_id;  // from the header ("" without one)
};

bool is_snapshot_name(const std::string& name) {
  static const std::regex pattern(R"(snapshot_e\d+(_s\d+)?\.h5)");
  return std::regex_match(name, pattern);
}

// Regular files in dir whose names satisfy keep(name); empty when dir does not exist.
std::vector<fs::path> files_in(const fs::path& dir, bool (*keep)(const std::string&)) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  try {
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file() && keep(entry.path().filename().string()))
        out.push_back(entry.path());
  } catch (const fs::filesystem_error& e) {
    throw SystemError("cannot list snapshot directory '" + dir.string() +
                      "': " + e.code().message());
  }
  return out;
}

// Complete candidates, newest first (ties broken by name for a stable order); the others are
// reported through skip. The position comes from our 512-byte header; only files without one are
// read in full.
std::vector<Candidate> by_position(const fs::path& dir,
                                   const std::function<void(const std::string&)>& skip) {
  std::vector<Candidate> out;
  for (auto& p : files_in(dir, is_snapshot_name)) {
    std::string error;
    if (const auto header = read_header(p, &error)) {
      out.push_back({p, header->position, header->run_id});
    } else if (!error.empty()) {
      if (skip) skip("snapshot '" + p.string() + "': " + error);
    } else {
      try {
        const SnapshotMeta meta = read_meta(p);
        out.push_back({p, meta.position, meta.run_id});
      } catch (const DataError& e) {
        if (skip) skip(e.what());
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.position != b.position) return a.position > b.position;
    return a.path.filename() > b.path.filename();
  });
  return out;
}

std::string padded(std::int64_t v, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*lld", width, static_cast<long long>(v));
  return buf;
}

}  // namespace

std::string snapshot_name(std::int64_t epoch) {
  return "snapshot_e" + padded(epoch, 4) + ".h5";
}

std::string snapshot_name(std::int64_t epoch, std::int64_t step) {
  return "snapshot_e" + padded(epoch, 4) + "_s" + padded(step, 6) + ".h5";
}

std::optional<fs::path> find_latest(const fs::path& dir,
                                    const std::function<void(const std::string&)>& warn,
                                    const std::string& run_id) {
  auto skip = [&](const std::string& why) {
    if (warn) warn("skipping unreadable " + why);
  };
  // The headers order the candidates; the newest is then read in full (checksum, every dataset),
  // falling back to older ones while that fails.
  for (const auto& c : by_position(dir, skip)) {
    if (!run_id.empty() && c.run_id != run_id) continue;
    try {
      (void)read_snapshot(c.path);
      return c.path;
    } catch (const DataError& e) {
      skip(e.what());
    }
  }
  return std::nullopt;
}

std::vector<fs::path> prune(const fs::path& dir, int keep, const std::string& run_id,
                            const TrainingPosition& newest) {
  std::vector<fs::path> removed;
  // Without a run id nothing can be told apart safely: keep everything.
  if (keep <= 0 || run_id.empty()) return removed;
  // This run's snapshots up to the one just written, newest first; only the headers are read (a
  // file without one is no run's, and is never parsed here).
  std::vector<Candidate> own;
  for (auto& p : files_in(dir, is_snapshot_name)) {
    std::string error;
    const auto h = read_header(p, &error);
    if (h && h->run_id == run_id && h->position <= newest)
      own.push_back({p, h->position, h->run_id});
  }
  std::sort(own.begin(), own.end(), [](const Candidate& a, const Candidate& b) {
    if (a.position != b.position) return a.position > b.position;
    return a.path.filename() > b.path.filename();
  });
  std::size_t kept = 0;
  for (const auto& c : own) {
    // Complete means length and checksum verified (a file that fails is not counted as kept,
    // and is not removed either).
    std::string error;
    const auto header = read_header(c.path, &error);
    if (!header || !verify_whole_file(c.path, *header).empty()) continue;
    if (kept < static_cast<std::size_t>(keep) || c.position == newest) {
      ++kept;
      continue;
    }
    std::error_code ec;
    fs::remove(c.path, ec);
    if (ec)
      throw SystemError("cannot delete old snapshot '" + c.path.string() + "': " + ec.message());
    removed.push_back(c.path);
  }
  return removed;
}

int remove_stale_temp_files(const fs::path& dir) {
  int removed = 0;
  const auto temps = files_in(dir, [](const std::string& name) {
    long pid = 0;
    return is_temp_name(name, &pid) && pid != static_cast<long>(::getpid());
  });
  for (const auto& p : temps) {
    std::error_code ec;
    if (fs::remove(p, ec)) ++removed;
  }
  return removed;
}

void ensure_writable_dir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw SystemError("run directory '" + dir.string() + "' exists but is not a directory");
  fs::create_directories(dir, ec);
  if (ec)
    throw SystemError("run directory '" + dir.string() + "' cannot be created: " + ec.message());
  // Permission bits do not tell the whole story (root, ACLs, read-only mounts, quotas): try it.
  const fs::path probe = dir / (".ddp_write_probe." + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    throw SystemError("run directory '" + dir.string() + "' is not writable: " + errno_text(errno));
  const char byte = 0;
  const bool wrote = ::write(fd, &byte, 1) == 1;
  const int err = wrote ? 0 : errno;
  ::close(fd);
  ::unlink(probe.c_str());
  if (!wrote)
    throw SystemError("run directory '" + dir.string() + "' is not writable: " + errno_text(err));
}

}  // namespace ddp::ckpt

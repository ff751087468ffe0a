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
      out.push_back({p, header->position});
    } else if (!error.empty()) {
      if (skip) skip("snapshot '" + p.string() + "': " + error);
    } else {
      try {
        out.push_back({p, read_meta(p).position});
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
                                    const std::function<void(const std::string&)>& warn) {
  auto skip = [&](const std::string& why) {
    if (warn) warn("skipping unreadable " + why);
  };
  // The headers order the candidates; the newest is then read in full (checksum, every dataset),
  // falling back to older ones while that fails.
  for (const auto& c : by_position(dir, skip)) {
    try {
      (void)read_snapshot(c.path);
      return c.path;
    } catch (const DataError& e) {
      skip(e.what());
    }
  }
  return std::nullopt;
}

void prune(const fs::path& dir, int keep) {
  if (keep <= 0) return;
  const auto candidates = by_position(dir, nullptr);
  for (std::size_t i = static_cast<std::size_t>(keep); i < candidates.size(); ++i) {
    std::error_code ec;
    fs::remove(candidates[i].path, ec);
    if (ec)
      throw SystemError("cannot delete old snapshot '" + candidates[i].path.string() +
                        "': " + ec.message());
  }
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

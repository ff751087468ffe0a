#pragma once
// POSIX pieces of the atomic write: fsync of a file or directory, the temporary name, errno text.
#include <filesystem>
#include <string>

namespace ddp::ckpt {

// Flushes p (a file or a directory) to stable storage. Returns 0 or the errno of the failure.
int fsync_path(const std::filesystem::path& p);

// "<dir>/.<name>.tmp.<pid>": hidden, in the same directory (rename is atomic only within one file
// system) and unique per writer process.
std::filesystem::path temp_path_for(const std::filesystem::path& file);

// True for names temp_path_for produces for snapshot files, "*.tmp.<pid>" in *pid.
bool is_temp_name(const std::string& name, long* pid);

std::string errno_text(int err);

}  // namespace ddp::ckpt

#pragma once
// The snapshot side of the atomic write: the generic POSIX pieces (ddp/io/durable_file.hpp) under
// the names ckpt has always used, and which temporary names are ours to clean up.
#include <string>

#include "ddp/io/durable_file.hpp"

namespace ddp::ckpt {

using io::errno_text;
using io::fsync_path;
using io::temp_path_for;
using io::write_durably;

// True for names temp_path_for produces for snapshot files and the run directory's other files,
// "*.tmp.<pid>" in *pid.
bool is_temp_name(const std::string& name, long* pid);

}  // namespace ddp::ckpt

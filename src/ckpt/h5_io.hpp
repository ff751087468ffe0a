#pragma once
// Typed helpers over the HDF5 C API for the snapshot layout: float32 tensors carrying a checksum,
// scalar attributes, string datasets, group listing. Paths are absolute ("/model/conv1/weight").
// Every failure throws h5::Failure saying what was being done and why; the callers add the file
// name and choose the error type (SystemError when writing, DataError when reading).
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "h5_handles.hpp"

namespace ddp::ckpt::h5 {

class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Why the last HDF5 call failed: the operating system's errno text when HDF5 recorded one
// ("No space left on device"), else HDF5's innermost message. Clears the error stack.
std::string last_error();

// Return id / do nothing when the call succeeded; otherwise throw Failure("<what>: <why>").
hid_t check_id(hid_t id, const std::string& what);
void check(herr_t status, const std::string& what);

// File access properties for snapshots: closing the file closes everything in it, and no file
// locking (the write-then-rename protocol needs none, and locking fails on some Lustre/NFS mounts).
PropList file_access();

// A group that remembers the creation order of its members, so that readers list layers in model
// order rather than alphabetically.
void create_group(hid_t file, const std::string& path);
std::vector<std::string> list_children(hid_t file, const std::string& path);
bool is_group(hid_t file, const std::string& path);

void write_tensor(hid_t file, const std::string& path, const float* data,
                  const std::vector<std::int64_t>& shape);
struct TensorData {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};
// max_bytes bounds the size (from the file size) so a corrupt shape cannot ask for terabytes.
// Verifies the checksum attribute when there is one.
TensorData read_tensor(hid_t file, const std::string& path, std::uint64_t max_bytes);

void write_string(hid_t file, const std::string& path, const std::string& text);
std::string read_string(hid_t file, const std::string& path, std::uint64_t max_bytes);

void set_attr_i64(hid_t file, const std::string& path, const char* name, std::int64_t value);
void set_attr_u64(hid_t file, const std::string& path, const char* name, std::uint64_t value);
void set_attr_string(hid_t file, const std::string& path, const char* name,
                     const std::string& value);
std::int64_t get_attr_i64(hid_t file, const std::string& path, const char* name);
std::uint64_t get_attr_u64(hid_t file, const std::string& path, const char* name);
std::string get_attr_string(hid_t file, const std::string& path, const char* name);

// 64-bit FNV-1a: of the little-endian bytes of float32 values (the tensor checksum), of text
// (the config digest). Standard and easy to recompute outside this program.
std::uint64_t fnv1a64(std::span<const float> values);
std::uint64_t fnv1a64(std::string_view text);

}  // namespace ddp::ckpt::h5

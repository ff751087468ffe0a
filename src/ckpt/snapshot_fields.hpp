#pragma once
// The snapshot field table: every value of a snapshot besides its tensors (SnapshotState), each
// described once: the group it lives in, its name there, how it is stored, whether older files may
// lack it. The HDF5 writer and reader, the byte codec (a child process's answer, the resume
// broadcast), inspect and the check of docs/snapshot_format.md all walk this table. Adding a field
// is a member of SnapshotMeta (or SnapshotState) and one row in snapshot_fields.cpp.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "byte_codec.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/h5/handles.hpp"

namespace ddp::ckpt {

// The member a field reads and writes. An int64 array is written only when it is not empty (an
// HDF5 attribute holds at least one value), so its rows are optional: absent reads as empty.
using FieldRef =
    std::variant<std::int64_t*, std::uint64_t*, double*, std::string*, std::vector<std::int64_t>*>;

enum class Stored {
  kAttribute,  // an attribute of the group
  kText,       // a string dataset in the group: texts may exceed HDF5's 64 KiB attribute limit
};

struct Field {
  const char* group;  // layout::kMeta or layout::kOptimizer
  const char* name;   // of the attribute or dataset
  Stored stored;
  bool optional;  // files written before it existed lack it: it then keeps SnapshotState's default
  FieldRef (*ref)(SnapshotState&);

  FieldRef at(const SnapshotState& s) const;  // for reading it only
  std::string type_name() const;              // "int64", "float64", "string", "int64 array", ...
  std::string value_text(const SnapshotState& s) const;  // as inspect shows it
};

// In the order they are written; a new field goes at the end of its group's rows.
const std::vector<Field>& snapshot_fields();

// The fields of `group` ("/meta", "/optimizer"; the group exists) into an HDF5 file, and back.
// Reading throws h5::Failure for a required field that is missing or of another type; a missing
// optional field keeps its value in `s`.
void write_fields(hid_t file, const std::string& group, const SnapshotState& s);
void read_fields(hid_t file, const std::string& group, SnapshotState& s, std::uint64_t max_bytes);

// Every field, all groups, in table order, after a digest of the table itself: a reader built with
// another table refuses the bytes (std::runtime_error) instead of misreading them.
void encode_fields(ByteWriter& w, const SnapshotState& s);
void decode_fields(ByteReader& r, SnapshotState& s);

}  // namespace ddp::ckpt

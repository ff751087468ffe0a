// read_snapshot / read_meta: everything is checked (the header's length and checksum before HDF5
// parses anything, then the format version, every group, dataset and attribute, sizes against the
// file size) and any problem is a DataError naming the file. A file without our header cannot be
// verified, and HDF5 can crash or loop on corrupt metadata: such a file is parsed only in a child
// process, which hands the parsed snapshot back (docs/snapshot_format.md).
#include <chrono>
#include <fstream>
#include <map>
#include <optional>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "ddp/h5/io.hpp"
#include "file_header.hpp"
#include "forked_call.hpp"
#include "snapshot_codec.hpp"
#include "snapshot_fields.hpp"
#include "snapshot_layout.hpp"

namespace ddp::ckpt {
namespace {

namespace fs = std::filesystem;

DataError bad(const fs::path& file, const std::string& why) {
  return DataError("snapshot '" + file.string() + "': " + why);
}

struct OpenFile {
  h5::File file;                 // opened from an in-memory copy of the file
  std::uint64_t size = 0;        // of the file: an upper bound for any dataset in it
  std::optional<Header> header;  // nullopt: a file without our header (only in a child process)
};

std::vector<char> slurp(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) throw bad(path, "no such file");
  if (!fs::is_regular_file(status)) throw bad(path, "not a regular file");
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes(fs::file_size(path, ec));
  if (ec || !in || !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw bad(path, "cannot read it: " + (ec ? ec.message() : std::string("read error")));
  return bytes;
}

// HDF5 over the bytes: verified ones (header given), or any in a child process.
OpenFile open_image(const fs::path& path, const std::vector<char>& bytes,
                    const std::optional<Header>& header) {
  OpenFile out;
  out.header = header;
  out.size = bytes.size();
  const h5::PropList fapl = h5::image_file_access(bytes.data(), bytes.size());
  // The name only labels the in-memory file, but HDF5 insists that no file by that name exists;
  // none can below a regular file.
  const fs::path label = path / "in-memory";
  const hid_t id = H5Fopen(label.c_str(), H5F_ACC_RDONLY, fapl);
  if (id < 0)
    throw h5::Failure("cannot open it as HDF5 (truncated, corrupt or not an HDF5 file): " +
                      h5::last_error());
  out.file = h5::File(id);
  return out;
}

// /meta (and /optimizer's attributes unless meta_only) through the field table.
void read_state(const OpenFile& f, SnapshotState& state, bool meta_only) {
  if (H5Lexists(f.file, "meta", H5P_DEFAULT) <= 0)
    throw h5::Failure("no /meta group: not a ddp_train snapshot");
  SnapshotMeta& meta = state.meta;
  // The version first: a future layout may differ in everything else.
  meta.format_version = h5::get_attr_i64(f.file, layout::kMeta, layout::kFormatVersion);
  if (meta.format_version != kFormatVersion)
    throw h5::Failure("format version " + std::to_string(meta.format_version) +
                      ", but this program reads version " + std::to_string(kFormatVersion));
  read_fields(f.file, layout::kMeta, state, f.size);
  if (!meta_only) read_fields(f.file, layout::kOptimizer, state, f.size);
  // The header is outside the checksum and orders snapshots in a directory: it must agree.
  if (f.header && f.header->position != meta.position)
    throw h5::Failure("the header's training position (epoch " +
                      std::to_string(f.header->position.epoch) + ", step " +
                      std::to_string(f.header->position.step_in_epoch) +
                      ") differs from /meta's (epoch " + std::to_string(meta.position.epoch) +
                      ", step " + std::to_string(meta.position.step_in_epoch) + ")");
  if (f.header && f.header->run_id != meta.run_id)
    throw h5::Failure("the header's run id '" + f.header->run_id + "' differs from /meta's '" +
                      meta.run_id + "'");
}

// Calls fn(name, path) for every dataset "<root>/<layer>/<leaf>", name = "<layer>.<leaf>".
template <typename Fn>
void for_each_tensor(hid_t file, const std::string& root, Fn fn) {
  for (const auto& layer : h5::list_children(file, root)) {
    const std::string group = layout::join(root, layer);
    if (!h5::is_group(file, group)) throw h5::Failure(group + ": expected a group per layer");
    for (const auto& leaf : h5::list_children(file, group))
      fn(layer + "." + leaf, layout::join(group, leaf));
  }
}

void read_model(const OpenFile& f, Snapshot& s) {
  for_each_tensor(f.file, layout::kModel, [&](const std::string& name, const std::string& path) {
    auto t = h5::read_tensor(f.file, path, f.size);
    // "a.b"/"c" and "a"/"b.c" would both be "a.b.c".
    if (!s.model.emplace(name, std::move(t.values)).second)
      throw h5::Failure(path + ": a second tensor named " + name);
    s.shapes.emplace_back(name, std::move(t.shape));
  });
}

void read_optimizer(const OpenFile& f, Snapshot& s) {
  const std::string root = layout::kOptimizer;
  std::map<std::string, const std::vector<std::int64_t>*> shape_of;
  for (const auto& [name, shape] : s.shapes) shape_of[name] = &shape;
  for (const auto& state : h5::list_children(f.file, root)) {
    auto& tensors = s.optimizer[state];
    for_each_tensor(f.file, layout::join(root, state),
                    [&](const std::string& name, const std::string& path) {
                      auto t = h5::read_tensor(f.file, path, f.size);
                      const auto it = shape_of.find(name);
                      if (it == shape_of.end() || *it->second != t.shape)
                        throw h5::Failure(path + ": no model tensor " + name + " of this shape");
                      tensors.emplace(name, std::move(t.values));
                    });
  }
}

// /ema, when the file has one: every tensor a model tensor of the same name and shape.
void read_ema(const OpenFile& f, Snapshot& s) {
  if (H5Lexists(f.file, "ema", H5P_DEFAULT) <= 0) return;
  std::map<std::string, const std::vector<std::int64_t>*> shape_of;
  for (const auto& [name, shape] : s.shapes) shape_of[name] = &shape;
  for_each_tensor(f.file, layout::kEma, [&](const std::string& name, const std::string& path) {
    auto t = h5::read_tensor(f.file, path, f.size);
    const auto it = shape_of.find(name);
    if (it == shape_of.end() || *it->second != t.shape)
      throw h5::Failure(path + ": no model tensor " + name + " of this shape");
    s.ema.emplace(name, std::move(t.values));
  });
}

Snapshot parse(const fs::path& path, const std::vector<char>& bytes,
               const std::optional<Header>& header, bool meta_only) {
  const OpenFile f = open_image(path, bytes, header);
  Snapshot s;
  s.source = path;
  read_state(f, s, meta_only);
  if (meta_only) return s;
  read_model(f, s);
  read_optimizer(f, s);
  read_ema(f, s);
  return s;
}

// A file without our header: HDF5 parses it in a child process, whose crash (a signal), hang (past
// a time limit) or error is this file's error; the parent only decodes the child's answer.
Snapshot parse_in_child(const fs::path& path, const std::vector<char>& bytes, bool meta_only) {
  const auto limit = std::chrono::seconds(30 + bytes.size() / (32u << 20));
  std::string answer;
  try {
    answer =
        call_in_child([&] { return encode_snapshot(parse(path, bytes, {}, meta_only)); }, limit);
  } catch (const ForkedCallFailure& e) {
    using Kind = ForkedCallFailure::Kind;
    if (e.kind() == Kind::kThrew) throw bad(path, e.what());
    if (e.kind() == Kind::kNotStarted)
      throw SystemError("snapshot '" + path.string() + "' has no ddp_train header, so it is " +
                        "parsed in a child process, but " + e.what());
    throw bad(path, std::string("corrupt: the child process parsing it with HDF5 ") + e.what() +
                        " (the file has no ddp_train header, so nothing could be verified before " +
                        "parsing it)");
  }
  try {
    return decode_snapshot(answer);
  } catch (const std::runtime_error& e) {
    throw bad(path, std::string("internal error: the child process's answer: ") + e.what());
  }
}

Snapshot read(const fs::path& path, bool meta_only) {
  h5::QuietErrors quiet;
  const std::vector<char> bytes = slurp(path);
  if (bytes.empty()) throw bad(path, "empty file");
  std::string error;
  const std::optional<Header> header = parse_header(bytes, &error);
  if (header) error = verify_file(bytes, *header);
  if (!error.empty()) throw bad(path, error);
  if (!header) return parse_in_child(path, bytes, meta_only);
  try {
    return parse(path, bytes, header, meta_only);
  } catch (const h5::Failure& e) {
    throw bad(path, e.what());
  }
}

}  // namespace

SnapshotMeta read_meta(const fs::path& file) {
  return read(file, true).meta;
}

Snapshot read_snapshot(const fs::path& file) {
  return read(file, false);
}

}  // namespace ddp::ckpt

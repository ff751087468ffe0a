// The snapshot field table, and the walks over it: HDF5 write and read, byte encoding, text.
#include "snapshot_fields.hpp"

#include <charconv>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "ddp/h5/io.hpp"
#include "snapshot_layout.hpp"

namespace ddp::ckpt {
namespace {

// DDP_FIELD(meta.seed) points a row at its member: the accessor and the member cannot diverge.
#define DDP_FIELD(member) [](SnapshotState& s) -> FieldRef { return &s.member; }

using layout::kMeta;
using layout::kOptimizer;
constexpr Stored kAttr = Stored::kAttribute;
constexpr Stored kText = Stored::kText;
constexpr bool kRequired = false;
constexpr bool kOptional = true;

template <typename T>
using Pointee = std::remove_pointer_t<T>;

std::uint64_t fnv1a64(std::uint64_t h, std::string_view text) {
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

std::string_view with_nul(const char* text) {
  return {text, std::strlen(text) + 1};
}

// Names, places, kinds and types of every field: what two programs must agree on to exchange
// encoded fields.
std::uint64_t table_digest() {
  static const std::uint64_t digest = [] {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    SnapshotState probe;
    for (const Field& f : snapshot_fields()) {
      const char kind[3] = {static_cast<char>(f.stored), static_cast<char>(f.ref(probe).index()),
                            '\0'};
      h = fnv1a64(fnv1a64(fnv1a64(h, with_nul(f.group)), with_nul(f.name)),
                  std::string_view(kind, 3));
    }
    return h;
  }();
  return digest;
}

}  // namespace

// Existing rows keep their names and types: older files must still read (format version 1).
// Required rows were in the first files; a new row goes at the end of its group's rows, optional.
const std::vector<Field>& snapshot_fields() {
  static const std::vector<Field> fields = {
      {kMeta, layout::kFormatVersion, kAttr, kRequired, DDP_FIELD(meta.format_version)},
      {kMeta, "program_version", kAttr, kRequired, DDP_FIELD(meta.program_version)},
      {kMeta, "epoch", kAttr, kRequired, DDP_FIELD(meta.position.epoch)},
      {kMeta, "step_in_epoch", kAttr, kRequired, DDP_FIELD(meta.position.step_in_epoch)},
      {kMeta, "samples_seen", kAttr, kRequired, DDP_FIELD(meta.position.samples_seen)},
      {kMeta, "global_step", kAttr, kRequired, DDP_FIELD(meta.position.global_step)},
      {kMeta, "seed", kAttr, kRequired, DDP_FIELD(meta.seed)},
      {kMeta, "world_size", kAttr, kRequired, DDP_FIELD(meta.world_size)},
      {kMeta, "loss_scale", kAttr, kOptional, DDP_FIELD(meta.loss_scale)},
      {kMeta, "loss_scale_good_steps", kAttr, kOptional, DDP_FIELD(meta.loss_scale_good_steps)},
      {kMeta, "run_id", kAttr, kOptional, DDP_FIELD(meta.run_id)},
      {kMeta, "global_batch", kAttr, kOptional, DDP_FIELD(meta.global_batch)},
      {kMeta, "run_train_s", kAttr, kOptional, DDP_FIELD(meta.run_train_s)},
      {kMeta, "epoch_loss_sum", kAttr, kOptional, DDP_FIELD(meta.epoch_progress.loss_sum)},
      {kMeta, "epoch_correct", kAttr, kOptional, DDP_FIELD(meta.epoch_progress.correct)},
      {kMeta, "epoch_samples", kAttr, kOptional, DDP_FIELD(meta.epoch_progress.samples)},
      {kMeta, "epoch_steps", kAttr, kOptional, DDP_FIELD(meta.epoch_progress.steps)},
      {kMeta, "epoch_train_s", kAttr, kOptional, DDP_FIELD(meta.epoch_progress.train_s)},
      {kMeta, "epoch_comm_wait_s", kAttr, kOptional, DDP_FIELD(meta.epoch_progress.comm_wait_s)},
      {kMeta, "rank_shares", kAttr, kOptional, DDP_FIELD(meta.rank_shares)},
      {kMeta, "config_toml", kText, kRequired, DDP_FIELD(meta.config_toml)},
      {kMeta, "metrics_jsonl", kText, kRequired, DDP_FIELD(meta.metrics_jsonl)},
      {kMeta, "init_from", kAttr, kOptional, DDP_FIELD(meta.init_from)},
      {kMeta, "chunk", kAttr, kOptional, DDP_FIELD(meta.chunk)},
      {kMeta, "kind", kAttr, kOptional, DDP_FIELD(meta.kind)},
      {kMeta, "imported_from", kAttr, kOptional, DDP_FIELD(meta.imported_from)},
      {kMeta, "ema_updates", kAttr, kOptional, DDP_FIELD(meta.ema_updates)},
      {kOptimizer, "name", kAttr, kRequired, DDP_FIELD(optimizer_name)},
      {kOptimizer, "steps", kAttr, kRequired, DDP_FIELD(optimizer_steps)},
  };
  return fields;
}

// Only ever read through: the accessors take a mutable state so that one table serves both ways.
FieldRef Field::at(const SnapshotState& s) const {
  return ref(const_cast<SnapshotState&>(s));
}

std::string Field::type_name() const {
  SnapshotState probe;
  return std::visit(
      [](auto* p) -> std::string {
        using T = Pointee<decltype(p)>;
        if constexpr (std::is_same_v<T, std::int64_t>)
          return "int64";
        else if constexpr (std::is_same_v<T, std::uint64_t>)
          return "uint64";
        else if constexpr (std::is_same_v<T, double>)
          return "float64";
        else if constexpr (std::is_same_v<T, std::string>)
          return "string";
        else
          return "int64 array";
      },
      ref(probe));
}

std::string Field::value_text(const SnapshotState& s) const {
  return std::visit(
      [this](auto* p) -> std::string {
        using T = Pointee<decltype(p)>;
        if constexpr (std::is_same_v<T, double>) {
          char buf[32];
          const auto end = std::to_chars(buf, buf + sizeof buf, *p).ptr;  // shortest exact form
          return std::string(buf, end);
        } else if constexpr (std::is_arithmetic_v<T>) {
          return std::to_string(*p);
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (stored == Stored::kText) return std::to_string(p->size()) + " bytes of text";
          return "\"" + *p + "\"";
        } else {
          std::string out;
          for (const auto v : *p) {
            if (!out.empty()) out += ' ';
            out += std::to_string(v);
          }
          return out.empty() ? "(none)" : out;
        }
      },
      at(s));
}

void write_fields(hid_t file, const std::string& group, const SnapshotState& s) {
  for (const Field& f : snapshot_fields()) {
    if (group != f.group) continue;
    std::visit(
        [&](auto* p) {
          using T = Pointee<decltype(p)>;
          if constexpr (std::is_same_v<T, std::int64_t>)
            h5::set_attr_i64(file, group, f.name, *p);
          else if constexpr (std::is_same_v<T, std::uint64_t>)
            h5::set_attr_u64(file, group, f.name, *p);
          else if constexpr (std::is_same_v<T, double>)
            h5::set_attr_f64(file, group, f.name, *p);
          else if constexpr (std::is_same_v<T, std::string>) {
            if (f.stored == Stored::kText)
              h5::write_string(file, layout::join(group, f.name), *p);
            else
              h5::set_attr_string(file, group, f.name, *p);
          } else if (!p->empty()) {
            h5::set_attr_i64s(file, group, f.name, *p);
          }
        },
        f.at(s));
  }
}

void read_fields(hid_t file, const std::string& group, SnapshotState& s, std::uint64_t max_bytes) {
  for (const Field& f : snapshot_fields()) {
    if (group != f.group) continue;
    const std::string path = layout::join(group, f.name);
    if (f.optional && !(f.stored == Stored::kText ? H5Lexists(file, path.c_str(), H5P_DEFAULT) > 0
                                                  : h5::has_attr(file, group, f.name)))
      continue;
    std::visit(
        [&](auto* p) {
          using T = Pointee<decltype(p)>;
          if constexpr (std::is_same_v<T, std::int64_t>)
            *p = h5::get_attr_i64(file, group, f.name);
          else if constexpr (std::is_same_v<T, std::uint64_t>)
            *p = h5::get_attr_u64(file, group, f.name);
          else if constexpr (std::is_same_v<T, double>)
            *p = h5::get_attr_f64(file, group, f.name);
          else if constexpr (std::is_same_v<T, std::string>)
            *p = f.stored == Stored::kText ? h5::read_string(file, path, max_bytes)
                                           : h5::get_attr_string(file, group, f.name);
          else
            *p = h5::get_attr_i64s(file, group, f.name);
        },
        f.ref(s));
  }
}

void encode_fields(ByteWriter& w, const SnapshotState& s) {
  w.put(table_digest());
  for (const Field& f : snapshot_fields()) std::visit([&](auto* p) { w.put(*p); }, f.at(s));
}

void decode_fields(ByteReader& r, SnapshotState& s) {
  if (r.get<std::uint64_t>() != table_digest())
    throw std::runtime_error(
        "snapshot codec: encoded by a program with other snapshot fields (another version?)");
  for (const Field& f : snapshot_fields()) {
    std::visit(
        [&](auto* p) {
          using T = Pointee<decltype(p)>;
          if constexpr (std::is_arithmetic_v<T>)
            *p = r.get<T>();
          else if constexpr (std::is_same_v<T, std::string>)
            *p = r.get_string();
          else
            *p = r.get_vector<std::int64_t>();
        },
        f.ref(s));
  }
}

}  // namespace ddp::ckpt

// write_snapshot: the HDF5 layout (docs/snapshot_format.md) built in memory, written to a
// temporary file, made durable, then renamed into place, so that a file with the final name is
// always complete.
#include <algorithm>
#include <optional>
#include <set>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "ddp/h5/io.hpp"
#include "durable_file.hpp"
#include "file_header.hpp"
#include "snapshot_fields.hpp"
#include "snapshot_layout.hpp"

namespace ddp::ckpt {
namespace {

namespace fs = std::filesystem;
using layout::Entry;

// One state buffer of the optimizer ("momentum") and where each parameter's state lies in it
// (nullopt: a frozen parameter, which has none and is not written).
struct OptimizerState {
  std::string name;
  const float* flat;
};

// Internal misuse, not a user error: the model/optimizer handed to us cannot be snapshotted.
void require_host_for_snapshot(const Tensor& t, const std::string& what) {
  if (t.device() != Device::cpu)
    throw Error("internal: snapshot of " + what + " on the GPU; copy it to the host first");
}

// Each entry's place in the state buffers (parameters with state only).
std::vector<std::optional<std::size_t>> state_offsets(const optim::Optimizer& opt,
                                                      const std::vector<Entry>& entries) {
  std::vector<std::optional<std::size_t>> out;
  for (const auto& e : entries)
    out.push_back(e.is_param ? opt.state_offset(e.tensor->offset) : std::nullopt);
  return out;
}

std::vector<OptimizerState> optimizer_state(optim::Optimizer& opt,
                                            const std::vector<Entry>& entries,
                                            const std::vector<std::optional<std::size_t>>& at) {
  std::size_t needed = 0;
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (at[i])
      needed =
          std::max(needed, *at[i] + static_cast<std::size_t>(entries[i].tensor->tensor.numel()));
  std::vector<OptimizerState> out;
  for (const auto& [name, t] : opt.state()) {
    require_host_for_snapshot(t, "optimizer state '" + name + "'");
    if (static_cast<std::size_t>(t.numel()) < needed)
      throw Error("internal: optimizer state '" + name + "' holds " + std::to_string(t.numel()) +
                  " values, the model's parameters need " + std::to_string(needed));
    out.push_back({name, t.data()});
  }
  return out;
}

// Groups "<root>/<layer>" for every layer that has tensors, in model order.
// With `only`, the layers of the entries it marks.
void create_layer_groups(hid_t f, const std::string& root, const std::vector<Entry>& entries,
                         const std::vector<std::optional<std::size_t>>* only = nullptr) {
  h5::create_group(f, root);
  std::set<std::string> done;
  for (std::size_t i = 0; i < entries.size(); ++i)
    if ((!only || (*only)[i]) && done.insert(entries[i].layer).second)
      h5::create_group(f, layout::join(root, entries[i].layer));
}

// The whole file built in memory. HDF5 never touches the disk, so a full disk cannot leave a
// half-closed file inside the library (HDF5 1.10 then crashes at exit); the bytes go out through
// write_durably, whose errors are plain errno.
std::vector<char> build_image(const fs::path& tmp, const std::vector<Entry>& entries,
                              const std::vector<std::optional<std::size_t>>& state_at,
                              const std::vector<OptimizerState>& optimizer,
                              const SnapshotState& state, const AveragedWeights* ema) {
  const SnapshotMeta& meta = state.meta;
  std::size_t tensor_bytes = 0;
  for (const auto& e : entries)
    tensor_bytes += ((e.is_param ? 1 + optimizer.size() : 1) + (ema ? 1 : 0)) *
                    static_cast<std::size_t>(e.tensor->tensor.numel()) * sizeof(float);
  const std::size_t estimate =
      tensor_bytes + meta.config_toml.size() + meta.metrics_jsonl.size() + (std::size_t{1} << 20);
  const h5::PropList fapl = h5::memory_file_access(estimate);
  h5::PropList fcpl(h5::check_id(H5Pcreate(H5P_FILE_CREATE), "creating file properties"));
  // The root group lists model, optimizer, meta in that order too.
  h5::check(H5Pset_link_creation_order(fcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
            "tracking creation order");
  h5::check(H5Pset_userblock(fcpl, kHeaderBytes), "reserving the header");
  h5::File f(h5::check_id(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, fcpl, fapl),
                          "creating the file in memory"));

  create_layer_groups(f, layout::kModel, entries);
  for (const auto& e : entries)
    h5::write_tensor(f, layout::join(layout::kModel, layout::join(e.layer, e.leaf)),
                     e.tensor->tensor.data(), e.tensor->tensor.shape().dims());

  h5::create_group(f, layout::kOptimizer);
  write_fields(f, layout::kOptimizer, state);
  for (const auto& s : optimizer) {
    const std::string root = layout::join(layout::kOptimizer, s.name);
    create_layer_groups(f, root, entries, &state_at);
    for (std::size_t i = 0; i < entries.size(); ++i)
      if (const auto& e = entries[i]; state_at[i])
        h5::write_tensor(f, layout::join(root, layout::join(e.layer, e.leaf)),
                         s.flat + *state_at[i], e.tensor->tensor.shape().dims());
  }

  if (ema) {
    // The moving average (train.ema), laid out as /model; older readers never look for it.
    create_layer_groups(f, layout::kEma, entries);
    for (const auto& e : entries) {
      const std::span<const float> flat = e.is_param ? ema->params : ema->buffers;
      h5::write_tensor(f, layout::join(layout::kEma, layout::join(e.layer, e.leaf)),
                       flat.data() + e.tensor->offset, e.tensor->tensor.shape().dims());
    }
  }

  h5::create_group(f, layout::kMeta);
  write_fields(f, layout::kMeta, state);

  h5::check(H5Fflush(f, H5F_SCOPE_GLOBAL), "flushing the file in memory");
  // The image starts at the superblock; the file reserves the user block in front of it (its
  // addresses count from there), which is where our header goes.
  const ssize_t size = H5Fget_file_image(f, nullptr, 0);
  if (size < 0) throw h5::Failure("sizing the file image: " + h5::last_error());
  std::vector<char> image(kHeaderBytes + static_cast<std::size_t>(size));
  if (H5Fget_file_image(f, image.data() + kHeaderBytes, static_cast<std::size_t>(size)) != size)
    throw h5::Failure("copying the file image: " + h5::last_error());
  h5::check(f.close(), "closing the file in memory");
  stamp_header(image, meta.position, meta.run_id);
  return image;
}

}  // namespace

void write_snapshot(const fs::path& file, const nn::Model& model, optim::Optimizer& opt,
                    const std::string& optimizer_name, const SnapshotMeta& meta,
                    const AveragedWeights* ema) {
  // The host mirrors of a GPU run's state (no copies on the CPU backend).
  model.pull_state();
  opt.pull_state();
  // Everything that can be refused without touching the disk comes first.
  const std::vector<Entry> entries = layout::model_entries(model);
  for (const auto& e : entries) require_host_for_snapshot(e.tensor->tensor, e.name);
  const auto state_at = state_offsets(opt, entries);
  const std::vector<OptimizerState> optimizer = optimizer_state(opt, entries, state_at);
  SnapshotState state{meta, optimizer_name, opt.steps_taken()};
  state.meta.format_version = kFormatVersion;
  if (ema && (ema->params.size() != model.host_params().size() ||
              ema->buffers.size() != model.host_buffers().size()))
    throw Error("internal: the moving average's buffers are not laid out as the model's");

  const fs::path tmp = temp_path_for(file);
  auto failure = [&](const std::string& why) {
    return SystemError("cannot write snapshot '" + file.string() + "': " + why);
  };
  auto discard_tmp = [&] {
    std::error_code ignored;
    fs::remove(tmp, ignored);
  };
  try {
    std::vector<char> image;
    {
      h5::QuietErrors quiet;
      image = build_image(tmp, entries, state_at, optimizer, state, ema);
    }
    const std::string error = write_durably(tmp, image.data(), image.size());
    if (!error.empty()) throw failure(error);
    std::error_code ec;
    fs::rename(tmp, file, ec);
    if (ec) throw failure("renaming " + tmp.filename().string() + ": " + ec.message());
  } catch (const h5::Failure& e) {
    discard_tmp();
    throw failure(e.what());
  } catch (...) {
    discard_tmp();
    throw;
  }
  // Makes the rename itself durable. Should this fail, the file is complete, but a crash could
  // still lose it: report it like any other failure to write.
  const fs::path dir = file.has_parent_path() ? file.parent_path() : ".";
  if (const int err = fsync_path(dir))
    throw failure("fsync of directory " + dir.string() + ": " + errno_text(err));
}

}  // namespace ddp::ckpt

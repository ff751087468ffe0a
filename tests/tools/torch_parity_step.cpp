// Test tool for the PyTorch parity test (tests/integration/test_torch_parity.sh): ddp_train's side
// of one training forward/backward, on the real model, backend and snapshot code.
//
//   torch_parity_step init CONFIG SNAPSHOT C H W
//     builds CONFIG's model for C x H x W inputs, initialises it from train.seed and writes it as a
//     snapshot (plain SGD, no optimizer state), for torch_parity.py to load and rewrite.
//   torch_parity_step step CONFIG SNAPSHOT BATCH OUT
//     loads SNAPSHOT into CONFIG's model, runs one training-mode forward on BATCH (/images float32
//     [N, C, H, W], /labels int [N]), the mean softmax cross-entropy (train.label_smoothing) and
//     backward, and writes OUT: /logits [N, classes], /loss [1], /grads/<parameter> and
//     /buffers/<buffer> (batch-norm running statistics after the step), named as in the snapshot.
//
// Dropout draws its masks from our counter RNG and torch from its own, so both sides run it with
// p = 0 (torch_parity.py does the same).
#include <hdf5.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "ddp/app/config.hpp"
#include "ddp/backend/cpu_backend.hpp"
#include "ddp/ckpt/snapshot.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/optimizer.hpp"

namespace {

using ddp::Shape;

void check(bool ok, const std::string& what) {
  if (!ok) throw ddp::Error("HDF5: " + what);
}

struct H5File {
  hid_t id;
  H5File(const std::string& path, bool write)
      : id(write ? H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)
                 : H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)) {
    check(id >= 0, "cannot open " + path);
  }
  ~H5File() { H5Fclose(id); }
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;
};

// A whole dataset converted to `mem_type`; its dimensions in *dims.
template <typename T>
std::vector<T> read_all(hid_t file, const char* path, hid_t mem_type, std::vector<hsize_t>* dims) {
  const hid_t ds = H5Dopen2(file, path, H5P_DEFAULT);
  check(ds >= 0, std::string("no dataset ") + path);
  const hid_t space = H5Dget_space(ds);
  const int rank = H5Sget_simple_extent_ndims(space);
  dims->assign(static_cast<std::size_t>(rank), 0);
  H5Sget_simple_extent_dims(space, dims->data(), nullptr);
  hsize_t n = 1;
  for (auto d : *dims) n *= d;
  std::vector<T> out(n);
  check(H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0,
        std::string("reading ") + path);
  H5Sclose(space);
  H5Dclose(ds);
  return out;
}

void write_floats(hid_t file, const std::string& path, const float* data,
                  const std::vector<hsize_t>& dims) {
  const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t ds =
      H5Dcreate2(file, path.c_str(), H5T_IEEE_F32LE, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  check(ds >= 0, "creating " + path);
  check(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0,
        "writing " + path);
  H5Dclose(ds);
  H5Sclose(space);
  H5Pclose(lcpl);
}

// Each named tensor as group/<name>; with `flat`, the values at the tensor's offset in that buffer
// (the gradients, which sit at the parameters' offsets).
void write_tensors(hid_t file, const std::string& group,
                   const std::vector<ddp::nn::NamedTensor>& ts, const float* flat = nullptr) {
  for (const auto& t : ts) {
    std::vector<hsize_t> dims;
    for (auto d : t.tensor.shape().dims()) dims.push_back(static_cast<hsize_t>(d));
    write_floats(file, group + "/" + t.name, flat ? flat + t.offset : t.tensor.data(), dims);
  }
}

struct Setup {
  ddp::app::Config cfg;
  std::unique_ptr<ddp::backend::Backend> be;
  std::unique_ptr<ddp::nn::Model> model;
  std::unique_ptr<ddp::optim::Optimizer> opt;
};

Setup build(const std::string& config, const Shape& input) {
  Setup s;
  s.cfg = ddp::app::load_config(config, {});
  for (auto& spec : s.cfg.model.layers)
    if (spec.type == "dropout") spec.p = 0.0f;
  s.be = ddp::backend::make_cpu_backend();
  s.model = std::make_unique<ddp::nn::Model>(s.cfg.model.layers, input,
                                             ddp::app::preset_options(s.cfg).classes, *s.be);
  s.opt = ddp::optim::Optimizer::create(s.cfg.optim, *s.be, s.model->params().size());
  return s;
}

int init(const std::string& config, const std::string& snapshot, const Shape& input) {
  Setup s = build(config, input);
  s.model->init_parameters(s.cfg.train.seed);
  ddp::ckpt::SnapshotMeta meta;
  meta.seed = s.cfg.train.seed;
  meta.config_toml = s.cfg.resolved_toml;
  ddp::ckpt::write_snapshot(snapshot, *s.model, *s.opt, s.cfg.optim.name, meta);
  std::printf("%s: %zu parameter tensors, %lld parameters\n", snapshot.c_str(),
              s.model->named_params().size(), static_cast<long long>(s.model->num_parameters()));
  return 0;
}

int step(const std::string& config, const std::string& snapshot, const std::string& batch,
         const std::string& out) {
  std::vector<hsize_t> idims, ldims;
  std::vector<float> images;
  std::vector<std::int32_t> labels;
  {
    H5File f(batch, false);
    images = read_all<float>(f.id, "/images", H5T_NATIVE_FLOAT, &idims);
    labels = read_all<std::int32_t>(f.id, "/labels", H5T_NATIVE_INT32, &ldims);
  }
  if (idims.size() != 4 || ldims.size() != 1 || ldims[0] != idims[0])
    throw ddp::DataError(batch + ": expected /images [N, C, H, W] and /labels [N]");
  const auto n = static_cast<std::int64_t>(idims[0]);
  const Shape input{static_cast<std::int64_t>(idims[1]), static_cast<std::int64_t>(idims[2]),
                    static_cast<std::int64_t>(idims[3])};
  Setup s = build(config, input);
  ddp::ckpt::restore(ddp::ckpt::read_snapshot(snapshot), *s.model, *s.opt);
  s.model->reserve(n);

  auto& be = *s.be;
  const std::int64_t classes = s.model->num_classes();
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = i;
  const ddp::nn::StepContext ctx{ddp::nn::Mode::train, 1, ids.data()};
  const ddp::Tensor x = ddp::Tensor::view(images.data(), input.with_batch(n), be.device());
  const ddp::Tensor& logits = s.model->forward(x, ctx);
  ddp::Tensor dlogits = be.alloc(Shape{n, classes});
  const auto r = be.softmax_xent(n, classes, logits.data(), labels.data(),
                                 static_cast<float>(s.cfg.train.label_smoothing),
                                 1.0f / static_cast<float>(n), dlogits.data());
  const float loss = static_cast<float>(r.loss_sum / static_cast<double>(n));
  std::vector<float> host_logits(static_cast<std::size_t>(n * classes));
  be.download(logits.data(), host_logits.data(), host_logits.size());
  s.model->backward(dlogits);
  be.synchronize();
  s.model->pull_state();

  H5File f(out, true);
  write_floats(f.id, "/logits", host_logits.data(),
               {static_cast<hsize_t>(n), static_cast<hsize_t>(classes)});
  write_floats(f.id, "/loss", &loss, {1});
  std::vector<float> grads(s.model->grads().size());
  be.download(s.model->grads().data(), grads.data(), grads.size());
  write_tensors(f.id, "/grads", s.model->named_params(), grads.data());
  write_tensors(f.id, "/buffers", s.model->named_buffers());
  std::printf("loss %.6f over %lld samples\n", static_cast<double>(loss),
              static_cast<long long>(n));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 6 && a[0] == "init")
      return init(a[1], a[2], Shape{std::stoll(a[3]), std::stoll(a[4]), std::stoll(a[5])});
    if (a.size() == 5 && a[0] == "step") return step(a[1], a[2], a[3], a[4]);
    std::fprintf(stderr,
                 "usage: torch_parity_step init CONFIG SNAPSHOT C H W\n"
                 "       torch_parity_step step CONFIG SNAPSHOT BATCH OUT\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_parity_step: %s\n", e.what());
    return 1;
  }
}

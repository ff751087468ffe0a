// gpu_bench: data-parallel training throughput on GPUs - the CUDA backend's training step for
// LeNet, the VGG net and ResNet-20 (synthetic CIFAR-10-shaped batches), one rank per GPU, gradients
// all-reduced with NCCL in buckets launched during backward (ddp_train's scheme: reverse layer
// order, a small first bucket), split into compute and wait-for-communication time per step.
//
//   gpu_bench [--model lenet|vgg|vgg_bn|resnet20|all] [--batch 256] [--steps 0] [--seconds 3]
//             [--warmup 20] [--bucket-mb 4] [--first-bucket-mb 1] [--no-upload] [--tf32] [--find]
//             [--precision fp32|bf16] [--csv]
//   mpirun -np 4 gpu_bench ...        (one rank per GPU; the ranks of a node take its GPUs in
//   order)
//
// Exits 77 (ctest's "skipped") with the reason when no usable GPU is found.
//
// Per step, as ddp_train does it: the next batch is uploaded from pinned memory on the copy stream
// (double-buffered, overlapped with the current step; --no-upload keeps one batch resident),
// forward, softmax cross-entropy (loss accumulated on the device, no host synchronisation),
// backward with each bucket's all-reduce started as soon as its layers are done, wait for all
// buckets, SGD (momentum 0.9) over the flat buffer. CUDA events on the compute stream split the
// step: compute = start -> end of backward plus the optimizer; comm wait = end of backward -> all
// buckets reduced (the communication that backward did not hide, plus the host's wake-up).
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddp/app/compute.hpp"
#include "ddp/backend/cuda_backend.hpp"
#include "ddp/backend/device_assign.hpp"
#include "ddp/comm/nccl_comm.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/nn/presets.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/rng.hpp"
#include "ddp/runtime/rank_info.hpp"
#include "ddp/sync/gradient_sync.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using ddp::backend::CudaBackend;
using ddp::backend::DeviceBuffer;
using ddp::backend::PinnedBuffer;

constexpr int kSkip = 77;

struct Options {
  std::vector<std::string> models = {"lenet", "vgg"};
  std::int64_t batch = 256;  // per rank
  int steps = 0;             // 0: run for `seconds`
  double seconds = 3.0;
  int warmup = 20;
  double bucket_mb = 4.0, first_bucket_mb = 1.0;
  bool upload = true;
  bool tf32 = false;
  bool find = false;
  bool csv = false;
  std::string precision = "fp32";  // of convolutions and linear layers (CudaOptions::precision)
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "gpu_bench: %s\nusage: gpu_bench [--model lenet|vgg|vgg_bn|resnet20|all] "
               "[--batch N] [--steps N] [--seconds S] [--warmup N] [--bucket-mb M] "
               "[--first-bucket-mb M] [--no-upload] [--tf32] [--find] [--precision fp32|bf16] "
               "[--csv]\n",
               why);
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised) MPI_Finalize();
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--model") {
      const std::string m = value();
      if (m == "all")
        o.models = {"lenet", "vgg", "vgg_bn", "resnet20"};
      else if (m == "lenet" || m == "vgg" || m == "vgg_bn" || m == "resnet20")
        o.models = {m};
      else
        usage(("unknown model " + m).c_str());
    } else if (a == "--batch") {
      o.batch = std::atoll(value().c_str());
    } else if (a == "--steps") {
      o.steps = std::atoi(value().c_str());
    } else if (a == "--seconds") {
      o.seconds = std::atof(value().c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atoi(value().c_str());
    } else if (a == "--bucket-mb") {
      o.bucket_mb = std::atof(value().c_str());
    } else if (a == "--first-bucket-mb") {
      o.first_bucket_mb = std::atof(value().c_str());
    } else if (a == "--no-upload") {
      o.upload = false;
    } else if (a == "--tf32") {
      o.tf32 = true;
    } else if (a == "--find") {
      o.find = true;
    } else if (a == "--precision") {
      // fp16 would need the trainer's loss scaling, which this step leaves out.
      o.precision = value();
      if (o.precision != "fp32" && o.precision != "bf16")
        usage(("unknown precision " + o.precision + " (fp32 or bf16)").c_str());
    } else if (a == "--csv") {
      o.csv = true;
    } else if (a == "--help" || a == "-h") {
      usage("help");
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (o.batch < 1 || o.warmup < 0 || o.steps < 0 || o.bucket_mb <= 0 || o.first_bucket_mb <= 0)
    usage("bad value");
  return o;
}

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw ddp::SystemError(std::string(what) + ": " + cudaGetErrorString(e));
}

struct StepEvents {
  cudaEvent_t start = nullptr, backward_done = nullptr, comm_done = nullptr, end = nullptr;
};

struct Result {
  std::string model;
  int steps = 0;
  double wall_s = 0, compute_ms = 0, comm_ms = 0;
  double loss_first = 0, loss_last = 0;
  std::size_t params = 0;
  std::size_t buckets = 0;
  double flops = 0;
};

Result run_model(const std::string& model, const Options& o, CudaBackend& be,
                 ddp::comm::NcclComm* comm, int ranks) {
  // The trainer's model, buckets and optimizer (nn::Model in device memory, sync::GradientSync).
  const auto layers = ddp::nn::preset_layers(model == "lenet"      ? "lenet"
                                             : model == "vgg_bn"   ? "vgg_small_bn"
                                             : model == "resnet20" ? "resnet20"
                                                                   : "vgg_small");
  const std::int64_t n = o.batch, classes = 10;
  const ddp::Shape input{3, 32, 32};
  const std::size_t sample = 3 * 32 * 32, xn = static_cast<std::size_t>(n) * sample;
  ddp::nn::Model net(layers, input, classes, be);
  net.init_parameters(1);
  net.reserve(n);
  const auto mib = [](double m) { return static_cast<std::size_t>(m * 1024 * 1024); };
  std::unique_ptr<ddp::sync::GradientSync> sync;
  if (comm)
    sync = std::make_unique<ddp::sync::GradientSync>(
        net, *comm, ddp::sync::SyncOptions{mib(o.bucket_mb), mib(o.first_bucket_mb)});

  // Two pinned host batches and two device slots (double-buffered uploads), labels pinned.
  const int dev = be.device_index();
  PinnedBuffer host_x[2] = {PinnedBuffer(dev, xn * sizeof(float)),
                            PinnedBuffer(dev, xn * sizeof(float))};
  DeviceBuffer dev_x[2] = {DeviceBuffer(dev, xn * sizeof(float)),
                           DeviceBuffer(dev, xn * sizeof(float))};
  PinnedBuffer labels(dev, static_cast<std::size_t>(n) * sizeof(std::int32_t));
  int rank = comm ? comm->rank() : 0;
  for (int s = 0; s < 2; ++s) {
    ddp::CounterRng rng(
        ddp::hash_words(7, static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(s)));
    for (std::size_t i = 0; i < xn; ++i) host_x[s].as<float>()[i] = 2.0f * rng.next_float() - 1.0f;
  }
  ddp::CounterRng lrng(ddp::hash_words(8, static_cast<std::uint64_t>(rank)));
  for (std::int64_t i = 0; i < n; ++i)
    labels.as<std::int32_t>()[i] =
        static_cast<std::int32_t>(lrng.next_below(static_cast<std::uint64_t>(classes)));
  for (int s = 0; s < 2; ++s) be.to_device(host_x[s].data(), dev_x[s].data(), xn * sizeof(float));
  const ddp::Tensor dlogits = be.alloc(ddp::Shape{n, classes});
  ddp::optim::Options oc;
  oc.momentum = 0.9;
  auto opt = ddp::optim::Optimizer::create(oc, be, net.params().size());
  const float grad_scale = 1.0f / static_cast<float>(n * ranks);  // the global mean
  auto stream = static_cast<cudaStream_t>(be.compute_stream());

  std::vector<StepEvents> events;
  const auto uploaded = be.new_event(false), compute_mark = be.new_event(false);
  auto step = [&](int k, StepEvents* ev) {
    const int slot = k % 2;
    if (ev) cuda_check(cudaEventRecord(ev->start, stream), "cudaEventRecord");
    if (o.upload) {
      using S = ddp::backend::DeviceQueue::Stream;
      be.stream_waits(S::compute, uploaded);  // batch k is in dev_x[slot]
      be.record(compute_mark, S::compute);    // dev_x[1 - slot] was last read by step k - 1
      be.stream_waits(S::copy, compute_mark);
      be.copy_to_device_async(host_x[1 - slot].data(), dev_x[1 - slot].data(), xn * sizeof(float));
      be.record(uploaded, S::copy);
    }
    const ddp::Tensor x =
        ddp::Tensor::view(dev_x[slot].floats(), input.with_batch(n), ddp::Device::cuda);
    const ddp::Tensor& logits =
        net.forward(x, ddp::nn::StepContext{ddp::nn::Mode::train, 0, nullptr});
    be.softmax_xent_accumulate(n, classes, logits.data(), labels.as<std::int32_t>(), 0.0f,
                               grad_scale, dlogits.data());
    if (sync) {
      sync->begin(1);
      net.backward(dlogits, sync->hook());
      sync->after_micro_batch();
    } else {
      net.backward(dlogits);
    }
    if (ev) cuda_check(cudaEventRecord(ev->backward_done, stream), "cudaEventRecord");
    if (sync) sync->finish();
    if (ev) cuda_check(cudaEventRecord(ev->comm_done, stream), "cudaEventRecord");
    opt->step(net.params(), net.grads(), 0.01);
    if (ev) cuda_check(cudaEventRecord(ev->end, stream), "cudaEventRecord");
  };

  Result r;
  r.model = model;
  r.params = static_cast<std::size_t>(net.num_parameters());
  r.buckets = sync ? sync->buckets().size() : 0;
  r.flops = net.forward_flops();
  // Warm-up: plans (algorithm choice), workspace, NCCL connections, clocks.
  for (int k = 0; k < std::max(o.warmup, 1); ++k) step(k, nullptr);
  be.synchronize();
  r.loss_first = be.take_loss().loss_sum / static_cast<double>(n * std::max(o.warmup, 1));
  if (comm) comm->barrier();

  // Timed steps. With --seconds the ranks agree on the count by all-reducing "keep going".
  const auto t0 = Clock::now();
  int k = 0;
  for (;; ++k) {
    if (o.steps > 0 && k >= o.steps) break;
    if (o.steps == 0 && k >= 3 && k % 10 == 0) {
      double go = std::chrono::duration<double>(Clock::now() - t0).count() < o.seconds ? 1 : 0;
      if (comm) {
        std::vector<double> v = {go};
        comm->allreduce_sum(std::span<double>(v));
        go = v[0] >= ranks ? 1 : 0;
      }
      if (go == 0) break;
    }
    StepEvents ev;
    for (cudaEvent_t* e : {&ev.start, &ev.backward_done, &ev.comm_done, &ev.end})
      cuda_check(cudaEventCreate(e), "cudaEventCreate");
    events.push_back(ev);
    step(k, &events.back());
  }
  be.synchronize();
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  r.steps = k;
  r.loss_last = be.take_loss().loss_sum / static_cast<double>(n * std::max(k, 1));
  for (auto& ev : events) {
    float a = 0, b = 0, c = 0;
    cuda_check(cudaEventElapsedTime(&a, ev.start, ev.backward_done), "cudaEventElapsedTime");
    cuda_check(cudaEventElapsedTime(&b, ev.backward_done, ev.comm_done), "cudaEventElapsedTime");
    cuda_check(cudaEventElapsedTime(&c, ev.comm_done, ev.end), "cudaEventElapsedTime");
    r.compute_ms += a + c;
    r.comm_ms += b;
    for (cudaEvent_t e : {ev.start, ev.backward_done, ev.comm_done, ev.end})
      (void)cudaEventDestroy(e);
  }
  r.compute_ms /= std::max(k, 1);
  r.comm_ms /= std::max(k, 1);
  return r;
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  // No GPU on some rank: every rank skips (ctest's code 77).
  const std::string why = ddp::backend::cuda_unavailable_reason();
  int usable = why.empty() ? 1 : 0, all_usable = 0;
  MPI_Allreduce(&usable, &all_usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_usable) {
    if (!why.empty())
      std::printf("gpu_bench: skipped on rank %d: no CUDA device: %s\n", rank, why.c_str());
    return kSkip;
  }

  // Placement: local rank from host names (as ddp_train), one GPU per rank, checked for sharing.
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  std::vector<char> all_names(static_cast<std::size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all_names.data(), MPI_MAX_PROCESSOR_NAME,
                MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> hosts;
  for (int q = 0; q < size; ++q)
    hosts.emplace_back(all_names.data() + static_cast<std::size_t>(q) * MPI_MAX_PROCESSOR_NAME);
  const auto placement = ddp::runtime::assign_local_ranks(hosts);
  ddp::backend::DeviceRequest req;
  req.host = hosts[static_cast<std::size_t>(rank)];
  req.rank = rank;
  req.local_rank = placement[static_cast<std::size_t>(rank)].local_rank;
  req.local_size = placement[static_cast<std::size_t>(rank)].local_size;
  // Which GPUs every rank sees (ranks bound to their own GPUs do not compete for the host's).
  std::string set = ddp::app::visible_device_set();
  set.resize(4095, '\0');  // a terminated 4096-byte record
  set.push_back('\0');
  std::vector<char> all_sets(static_cast<std::size_t>(size) * 4096);
  MPI_Allgather(set.data(), 4096, MPI_CHAR, all_sets.data(), 4096, MPI_CHAR, MPI_COMM_WORLD);
  for (int q = 0; q < size; ++q) {
    if (hosts[static_cast<std::size_t>(q)] != req.host) continue;
    req.host_ranks.push_back(q);
    req.host_device_sets.emplace_back(all_sets.data() + static_cast<std::size_t>(q) * 4096);
  }
  if (static_cast<int>(req.host_device_sets.size()) != req.local_size) req.host_device_sets.clear();
  req.visible_devices = ddp::backend::cuda_device_count();
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) req.cuda_visible_devices = v;
  const int device = ddp::backend::assign_device(req);
  const auto info = ddp::backend::cuda_device_info(device);
  char uuid[64] = {};
  std::snprintf(uuid, sizeof uuid, "%s", info.uuid.c_str());
  std::vector<char> all_uuids(static_cast<std::size_t>(size) * sizeof uuid);
  MPI_Allgather(uuid, sizeof uuid, MPI_CHAR, all_uuids.data(), sizeof uuid, MPI_CHAR,
                MPI_COMM_WORLD);
  std::vector<ddp::backend::DeviceClaim> claims;
  for (int q = 0; q < size; ++q)
    claims.push_back({q, hosts[static_cast<std::size_t>(q)], 0,
                      std::string(all_uuids.data() + static_cast<std::size_t>(q) * sizeof uuid),
                      ""});
  ddp::backend::check_distinct_devices(claims);

  ddp::backend::CudaOptions copt;
  copt.allow_tf32 = o.tf32;
  copt.benchmark = o.find;
  copt.precision =
      o.precision == "bf16" ? ddp::backend::Precision::bf16 : ddp::backend::Precision::fp32;
  auto be = ddp::backend::make_cuda_backend(device, copt);
  std::unique_ptr<ddp::comm::NcclComm> comm;
  if (size > 1) comm = ddp::comm::make_nccl_comm(MPI_COMM_WORLD, device, be->compute_stream());

  if (rank == 0) {
    std::printf("gpu_bench: %d rank(s); rank 0 on %s (%s), %s\n", size, be->name().c_str(),
                info.pci_bus_id.c_str(), ddp::backend::cuda_versions().c_str());
    std::printf(
        "  batch %lld per rank (global %lld), SGD momentum 0.9, %s, buckets %.1f MiB (first %.1f "
        "MiB), "
        "uploads %s, TF32 %s, precision %s, algorithms by %s\n",
        static_cast<long long>(o.batch), static_cast<long long>(o.batch * size),
        size > 1 ? "NCCL all-reduce" : "no communication (1 rank)", o.bucket_mb, o.first_bucket_mb,
        o.upload ? "double-buffered" : "off", o.tf32 ? "on" : "off", o.precision.c_str(),
        o.find ? "timing (cudnnFind)" : "heuristics (_v7)");
    std::printf("  %-8s %5s %6s %6s %9s %11s %13s %11s %9s %s\n", "model", "ranks", "batch",
                "steps", "ms/step", "compute ms", "comm wait ms", "images/s", "GFLOP/s", "loss");
  }
  for (const auto& m : o.models) {
    const Result r = run_model(m, o, *be, comm.get(), size);
    // Rank 0 reports; the split is rank 0's (the slowest rank shows in everyone's comm wait).
    if (rank != 0) continue;
    const double ms = 1000.0 * r.wall_s / std::max(r.steps, 1);
    const double images = static_cast<double>(o.batch * size) * r.steps / r.wall_s;
    const double gflops = 3.0 * r.flops * images / 1e9;
    std::printf("  %-8s %5d %6lld %6d %9.3f %11.3f %13.3f %11.1f %9.1f %.3f->%.3f\n",
                r.model.c_str(), size, static_cast<long long>(o.batch), r.steps, ms, r.compute_ms,
                r.comm_ms, images, gflops, r.loss_first, r.loss_last);
    if (o.csv)
      std::printf("csv,gpu,%s,%d,%lld,%d,%.4f,%.4f,%.4f,%.1f,%zu,%s\n", r.model.c_str(), size,
                  static_cast<long long>(o.batch), r.steps, ms, r.compute_ms, r.comm_ms, images,
                  r.buckets, o.precision.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = 0;
  try {
    code = run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: error (rank %d): %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  MPI_Finalize();
  return code;
}

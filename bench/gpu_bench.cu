// gpu_bench: data-parallel training throughput on GPUs - the CUDA backend's training step for the
// preset nets (LeNet, the small VGGs, the CIFAR ResNets, torchvision's ResNets and MobileNetV2) on
// synthetic batches, one rank per GPU, gradients all-reduced with NCCL in buckets launched during
// backward (ddp_train's scheme: reverse layer order, a small first bucket), split into compute and
// wait-for-communication time per step; optionally a per-layer profile.
//
//   gpu_bench [--model NAME[,NAME...]|all] [--batch 256] [--image 32] [--classes N] [--steps 0]
//             [--seconds 3] [--warmup 20] [--rounds 1] [--rewarm 3] [--gate] [--bucket-mb 4]
//             [--first-bucket-mb 1] [--no-upload] [--tf32] [--algos timed|heuristic]
//             [--bn own|cudnn] [--precision fp32|bf16] [--csv] [--json] [--profile]
//             [--profile-steps 10]
//   mpirun -np 4 gpu_bench ...        (one rank per GPU; the ranks of a node take its GPUs in
//   order)
//
// The defaults are the trainer's (CudaOptions' defaults): cuDNN algorithms timed once per shape,
// the fastest deterministic one taken; batch norm on the backend's own kernels. --algos heuristic
// (cuDNN's heuristics, deterministic first) and --bn cudnn bring back the choices measured in the
// 2026-11-28 baseline, for A/B runs; --find is --algos timed.
//
// Exits 77 (ctest's "skipped") with the reason when no usable GPU is found.
//
// Per step, as ddp_train does it: the next batch is uploaded from pinned memory on the copy stream
// (double-buffered, overlapped with the current step; --no-upload keeps the batches resident),
// forward, softmax cross-entropy (loss accumulated on the device, no host synchronisation),
// backward with each bucket's all-reduce started as soon as its layers are done, wait for all
// buckets, SGD (momentum 0.9, Nesterov, weight decay 5e-4: the CIFAR configs' optimizer) over the
// flat buffer. Events on the compute stream split the step: compute = start -> end of backward
// plus the optimizer; comm wait = end of backward -> all buckets reduced (the communication that
// backward did not hide, plus the host's wake-up).
//
// Rounds and the gate (bench/gpu_compare.sh runs it against PyTorch, interleaved). --rounds R
// times R measurements of each model after one warm-up, each preceded by --rewarm untimed steps
// (the GPU's clocks drop while it idles between rounds). With --gate, before each round rank 0
// prints {"event": "ready", ...} and reads one line from its standard input: "go" runs the round,
// anything else or the end of input ends that model's rounds. --json prints one JSON object per
// round ({"event": "run", ...}: images/s, ms per step, the GPU and the library versions).
//
// --profile: after the rounds, --profile-steps steps with CUDA events around every layer's forward
// and backward (nn::Model::set_layer_probe), the loss, the wait for the all-reduce and the
// optimizer, each step synchronised; a table sorted by time with each part's share of the step.
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
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
using EventId = ddp::backend::DeviceQueue::EventId;
using QueueStream = ddp::backend::DeviceQueue::Stream;

constexpr int kSkip = 77;

// Bench names and the presets they build ("lenet", "vgg" and "vgg_bn" are the older short names).
struct ModelName {
  const char* bench;
  const char* preset;
};
constexpr ModelName kModels[] = {
    {"lenet", "lenet"},         {"vgg", "vgg_small"},
    {"vgg_bn", "vgg_small_bn"}, {"resnet20", "resnet20"},
    {"resnet56", "resnet56"},   {"resnet18", "resnet18"},
    {"resnet50", "resnet50"},   {"mobilenet_v2", "mobilenet_v2"},
};
const char* preset_of(const std::string& bench) {
  for (const auto& m : kModels)
    if (bench == m.bench) return m.preset;
  return nullptr;
}

struct Options {
  std::vector<std::string> models = {"lenet", "vgg"};
  std::int64_t batch = 256;  // per rank
  std::int64_t image = 32;   // side of the square inputs
  std::int64_t classes = 0;  // 0: 10 for inputs of at most 64 px (CIFAR), else 1000 (ImageNet)
  int steps = 0;             // 0: run for `seconds`
  double seconds = 3.0;
  int warmup = 20;
  int rounds = 1;
  int rewarm = 3;
  bool gate = false;
  double bucket_mb = 4.0, first_bucket_mb = 1.0;
  bool upload = true;
  bool tf32 = false;
  std::string algos = "timed";  // cuDNN convolution algorithms: timed | heuristic
  std::string bn = "own";       // batch norm: own kernels | cudnn
  bool csv = false;
  bool json = false;
  bool profile = false;
  int profile_steps = 10;
  std::string precision = "fp32";  // of convolutions and linear layers (CudaOptions::precision)
};

[[noreturn]] void usage(const char* why) {
  std::string names;
  for (const auto& m : kModels) names += std::string(names.empty() ? "" : "|") + m.bench;
  std::fprintf(stderr,
               "gpu_bench: %s\nusage: gpu_bench [--model %s[,...]|all] [--batch N] [--image PX] "
               "[--classes N] [--steps N] [--seconds S] [--warmup N] [--rounds N] [--rewarm N] "
               "[--gate] [--bucket-mb M] [--first-bucket-mb M] [--no-upload] [--tf32] "
               "[--algos timed|heuristic] [--bn own|cudnn] [--precision fp32|bf16] [--csv] "
               "[--json] [--profile] [--profile-steps N]\n",
               why, names.c_str());
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
      const std::string list = value();
      o.models.clear();
      if (list == "all") {
        o.models = {"lenet", "vgg", "vgg_bn", "resnet20"};
        continue;
      }
      for (std::size_t b = 0; b <= list.size();) {
        const std::size_t e = std::min(list.find(',', b), list.size());
        const std::string m = list.substr(b, e - b);
        if (!preset_of(m)) usage(("unknown model '" + m + "'").c_str());
        o.models.push_back(m);
        b = e + 1;
      }
    } else if (a == "--batch") {
      o.batch = std::atoll(value().c_str());
    } else if (a == "--image") {
      o.image = std::atoll(value().c_str());
    } else if (a == "--classes") {
      o.classes = std::atoll(value().c_str());
    } else if (a == "--steps") {
      o.steps = std::atoi(value().c_str());
    } else if (a == "--seconds") {
      o.seconds = std::atof(value().c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atoi(value().c_str());
    } else if (a == "--rounds") {
      o.rounds = std::atoi(value().c_str());
    } else if (a == "--rewarm") {
      o.rewarm = std::atoi(value().c_str());
    } else if (a == "--gate") {
      o.gate = true;
    } else if (a == "--bucket-mb") {
      o.bucket_mb = std::atof(value().c_str());
    } else if (a == "--first-bucket-mb") {
      o.first_bucket_mb = std::atof(value().c_str());
    } else if (a == "--no-upload") {
      o.upload = false;
    } else if (a == "--tf32") {
      o.tf32 = true;
    } else if (a == "--find") {
      o.algos = "timed";
    } else if (a == "--algos") {
      o.algos = value();
      if (o.algos != "timed" && o.algos != "heuristic")
        usage(("unknown --algos " + o.algos + " (timed or heuristic)").c_str());
    } else if (a == "--bn") {
      o.bn = value();
      if (o.bn != "own" && o.bn != "cudnn")
        usage(("unknown --bn " + o.bn + " (own or cudnn)").c_str());
    } else if (a == "--precision") {
      // fp16 would need the trainer's loss scaling, which this step leaves out.
      o.precision = value();
      if (o.precision != "fp32" && o.precision != "bf16")
        usage(("unknown precision " + o.precision + " (fp32 or bf16)").c_str());
    } else if (a == "--csv") {
      o.csv = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--profile") {
      o.profile = true;
    } else if (a == "--profile-steps") {
      o.profile_steps = std::atoi(value().c_str());
    } else if (a == "--help" || a == "-h") {
      usage("help");
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (o.batch < 1 || o.image < 1 || o.classes < 0 || o.warmup < 0 || o.steps < 0 || o.rounds < 1 ||
      o.rewarm < 0 || o.profile_steps < 1 || o.bucket_mb <= 0 || o.first_bucket_mb <= 0 ||
      o.seconds <= 0)
    usage("bad value");
  if (o.classes == 0) o.classes = o.image <= 64 ? 10 : 1000;
  return o;
}

// A JSON string literal (names and version texts: no control characters beyond the usual).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Where one step's parts begin and end on the compute stream (timing events of the backend).
struct StepMarks {
  EventId start, forward_done, loss_done, backward_done, comm_done, end;
};

struct Result {
  int steps = 0;
  double wall_s = 0, compute_ms = 0, comm_ms = 0;
  double loss_first = 0, loss_last = 0;
};

// Per-layer device time of the profiled steps, summed over them (ms).
struct LayerTime {
  double forward_ms = 0, backward_ms = 0;
  bool forward_seen = false, backward_seen = false;
};

// One model on one backend: the trainer's model, buckets and optimizer (nn::Model in device
// memory, sync::GradientSync) and the synthetic batches, stepped as ddp_train steps.
class ModelBench {
 public:
  ModelBench(const std::string& model, const Options& o, CudaBackend& be, ddp::comm::NcclComm* comm,
             int ranks)
      : o_(o),
        be_(be),
        comm_(comm),
        input_{3, o.image, o.image},
        net_(ddp::nn::preset_layers(preset_of(model), preset_options(o)), input_, o.classes, be),
        xn_(static_cast<std::size_t>(o.batch * input_.numel())),
        grad_scale_(1.0f / static_cast<float>(o.batch * ranks)) {  // the global mean
    net_.init_parameters(1);
    net_.reserve(o.batch);
    const auto mib = [](double m) { return static_cast<std::size_t>(m * 1024 * 1024); };
    if (comm)
      sync_ = std::make_unique<ddp::sync::GradientSync>(
          net_, *comm, ddp::sync::SyncOptions{mib(o.bucket_mb), mib(o.first_bucket_mb)});

    // Two pinned host batches and two device slots (double-buffered uploads), labels pinned.
    const int dev = be.device_index();
    const int rank = comm ? comm->rank() : 0;
    for (int s = 0; s < 2; ++s) {
      host_x_[s] = PinnedBuffer(dev, xn_ * sizeof(float));
      dev_x_[s] = DeviceBuffer(dev, xn_ * sizeof(float));
      ddp::CounterRng rng(
          ddp::hash_words(7, static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(s)));
      float* x = host_x_[s].as<float>();
      for (std::size_t i = 0; i < xn_; ++i) x[i] = 2.0f * rng.next_float() - 1.0f;
      be.to_device(host_x_[s].data(), dev_x_[s].data(), xn_ * sizeof(float));
    }
    labels_ = PinnedBuffer(dev, static_cast<std::size_t>(o.batch) * sizeof(std::int32_t));
    ddp::CounterRng lrng(ddp::hash_words(8, static_cast<std::uint64_t>(rank)));
    for (std::int64_t i = 0; i < o.batch; ++i)
      labels_.as<std::int32_t>()[i] =
          static_cast<std::int32_t>(lrng.next_below(static_cast<std::uint64_t>(o.classes)));
    // Dropout (MobileNetV2's classifier) draws its masks from the samples' dataset indices.
    for (std::int64_t i = 0; i < o.batch; ++i) sample_ids_.push_back(i);
    dlogits_ = be.alloc(ddp::Shape{o.batch, o.classes});
    ddp::optim::Options oc;
    oc.momentum = 0.9;
    oc.nesterov = true;
    oc.weight_decay = 5e-4;
    opt_ = ddp::optim::Optimizer::create(oc, be, net_.params().size());
    uploaded_ = be.new_event(false);
    compute_mark_ = be.new_event(false);
  }

  ~ModelBench() {
    be_.release_event(uploaded_);
    be_.release_event(compute_mark_);
  }
  ModelBench(const ModelBench&) = delete;
  ModelBench& operator=(const ModelBench&) = delete;

  ddp::nn::Model& net() { return net_; }
  std::size_t buckets() const { return sync_ ? sync_->buckets().size() : 0; }

  // `steps` untimed steps, then waits for them; returns their mean loss.
  double warm(int steps) {
    for (int k = 0; k < steps; ++k) step(nullptr);
    be_.synchronize();
    const double loss =
        be_.take_loss().loss_sum / static_cast<double>(o_.batch * std::max(steps, 1));
    if (comm_) comm_->barrier();
    return loss;
  }

  // One timed round. With --seconds the ranks agree on the count by all-reducing "keep going".
  Result measure(int ranks) {
    std::vector<StepMarks> marks;
    const auto t0 = Clock::now();
    int k = 0;
    for (;; ++k) {
      if (o_.steps > 0 && k >= o_.steps) break;
      if (o_.steps == 0 && k >= 3 && k % 10 == 0) {
        double go = std::chrono::duration<double>(Clock::now() - t0).count() < o_.seconds ? 1 : 0;
        if (comm_) {
          std::vector<double> v = {go};
          comm_->allreduce_sum(std::span<double>(v));
          go = v[0] >= ranks ? 1 : 0;
        }
        if (go == 0) break;
      }
      marks.push_back(new_marks());
      step(&marks.back());
    }
    be_.synchronize();
    Result r;
    r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    r.steps = k;
    r.loss_last = be_.take_loss().loss_sum / static_cast<double>(o_.batch * std::max(k, 1));
    for (const auto& m : marks) {
      r.compute_ms +=
          1e3 * (be_.elapsed_s(m.start, m.backward_done) + be_.elapsed_s(m.comm_done, m.end));
      r.comm_ms += 1e3 * be_.elapsed_s(m.backward_done, m.comm_done);
      release(m);
    }
    r.compute_ms /= std::max(k, 1);
    r.comm_ms /= std::max(k, 1);
    return r;
  }

  // --profile: `steps` steps, each synchronised, with events around every layer's passes.
  void profile(int steps, const std::string& model, double throughput_ms) {
    const std::size_t count = net_.num_layers();
    std::vector<EventId> ev(4 * count);  // per layer: forward begin, end, backward begin, end
    for (auto& e : ev) e = be_.new_event(true);
    std::vector<LayerTime> times(count);
    std::vector<char> recorded(2 * count);
    net_.set_layer_probe([&](ddp::nn::LayerPass pass, std::size_t i, bool begin) {
      const std::size_t p = pass == ddp::nn::LayerPass::backward ? 1 : 0;
      be_.record(ev[4 * i + 2 * p + (begin ? 0 : 1)], QueueStream::compute);
      recorded[2 * i + p] = 1;
    });
    double forward = 0, loss = 0, backward = 0, comm = 0, optimizer = 0, whole = 0;
    for (int s = 0; s < steps; ++s) {
      std::fill(recorded.begin(), recorded.end(), 0);
      const StepMarks m = new_marks();
      step(&m);
      be_.synchronize();
      const auto ms = [&](EventId a, EventId b) { return 1e3 * be_.elapsed_s(a, b); };
      forward += ms(m.start, m.forward_done);
      loss += ms(m.forward_done, m.loss_done);
      backward += ms(m.loss_done, m.backward_done);
      comm += ms(m.backward_done, m.comm_done);
      optimizer += ms(m.comm_done, m.end);
      whole += ms(m.start, m.end);
      for (std::size_t i = 0; i < count; ++i) {
        if (recorded[2 * i]) {
          times[i].forward_ms += ms(ev[4 * i], ev[4 * i + 1]);
          times[i].forward_seen = true;
        }
        if (recorded[2 * i + 1]) {
          times[i].backward_ms += ms(ev[4 * i + 2], ev[4 * i + 3]);
          times[i].backward_seen = true;
        }
      }
      release(m);
    }
    net_.set_layer_probe({});
    for (auto e : ev) be_.release_event(e);
    (void)be_.take_loss();
    if (comm_ && comm_->rank() != 0) return;
    print_profile(model, steps, times, forward, loss, backward, comm, optimizer, whole,
                  throughput_ms);
  }

 private:
  static ddp::nn::PresetOptions preset_options(const Options& o) {
    ddp::nn::PresetOptions p;
    p.image_side = o.image;  // stem auto: the CIFAR stem up to 64 px, torchvision's above
    p.classes = o.classes;
    return p;
  }

  StepMarks new_marks() {
    return {be_.new_event(true), be_.new_event(true), be_.new_event(true),
            be_.new_event(true), be_.new_event(true), be_.new_event(true)};
  }
  void release(const StepMarks& m) {
    for (EventId e : {m.start, m.forward_done, m.loss_done, m.backward_done, m.comm_done, m.end})
      be_.release_event(e);
  }

  void step(const StepMarks* m) {
    const int slot = static_cast<int>(k_++ % 2);
    const auto mark = [&](EventId e) {
      if (m) be_.record(e, QueueStream::compute);
    };
    if (m) mark(m->start);
    if (o_.upload) {
      be_.stream_waits(QueueStream::compute, uploaded_);  // batch k is in dev_x[slot]
      be_.record(compute_mark_, QueueStream::compute);    // dev_x[1 - slot] was read by step k - 1
      be_.stream_waits(QueueStream::copy, compute_mark_);
      be_.copy_to_device_async(host_x_[1 - slot].data(), dev_x_[1 - slot].data(),
                               xn_ * sizeof(float));
      be_.record(uploaded_, QueueStream::copy);
    }
    const ddp::Tensor x =
        ddp::Tensor::view(dev_x_[slot].floats(), input_.with_batch(o_.batch), ddp::Device::cuda);
    const ddp::Tensor& logits =
        net_.forward(x, ddp::nn::StepContext{ddp::nn::Mode::train, k_, sample_ids_.data()});
    if (m) mark(m->forward_done);
    be_.softmax_xent_accumulate(o_.batch, o_.classes, logits.data(), labels_.as<std::int32_t>(),
                                0.0f, grad_scale_, dlogits_.data());
    if (m) mark(m->loss_done);
    if (sync_) {
      sync_->begin(1);
      net_.backward(dlogits_, sync_->hook());
      sync_->after_micro_batch();
    } else {
      net_.backward(dlogits_);
    }
    if (m) mark(m->backward_done);
    if (sync_) sync_->finish();
    if (m) mark(m->comm_done);
    opt_->step(net_.params(), net_.grads(), 0.01);
    if (m) mark(m->end);
  }

  void print_profile(const std::string& model, int steps, const std::vector<LayerTime>& times,
                     double forward, double loss, double backward, double comm, double optimizer,
                     double whole, double throughput_ms) const {
    const double per = 1.0 / steps;
    struct Row {
      std::size_t layer;
      double fwd, bwd;
    };
    std::vector<Row> rows;
    double fwd_sum = 0, bwd_sum = 0;
    for (std::size_t i = 0; i < times.size(); ++i) {
      if (!times[i].forward_seen && !times[i].backward_seen) continue;  // views: no work
      rows.push_back({i, times[i].forward_ms * per, times[i].backward_ms * per});
      fwd_sum += rows.back().fwd;
      bwd_sum += rows.back().bwd;
    }
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Row& a, const Row& b) { return a.fwd + a.bwd > b.fwd + b.bwd; });
    whole *= per;
    const auto share = [&](double ms) { return whole > 0 ? 100.0 * ms / whole : 0.0; };
    std::printf(
        "per-layer profile: %s, %s%s, batch %lld, %lldx%lld inputs, %d steps (CUDA events on the "
        "compute stream, each step synchronised; ms per step, sorted by time)\n",
        model.c_str(), o_.precision.c_str(), o_.tf32 ? " (TF32)" : "",
        static_cast<long long>(o_.batch), static_cast<long long>(o_.image),
        static_cast<long long>(o_.image), steps);
    std::printf("  %-28s %-14s %-14s %9s %9s %9s %7s %8s\n", "layer", "type", "output", "fwd ms",
                "bwd ms", "total ms", "share", "GFLOP/s");
    const auto& shapes = net_.graph().plan().out_shapes;
    for (const Row& r : rows) {
      const auto& l = net_.layer(r.layer);
      const double total = r.fwd + r.bwd;
      // Forward FLOPs x 3 (forward, data and weight gradients) over the layer's time.
      const double flops = 3.0 * l.forward_flops() * static_cast<double>(o_.batch);
      char rate[32] = "-";
      if (flops > 0 && total > 0) std::snprintf(rate, sizeof rate, "%.0f", flops / total / 1e6);
      std::printf("  %-28s %-14s %-14s %9.3f %9.3f %9.3f %6.1f%% %8s\n", l.name().c_str(),
                  l.spec().type.c_str(), shapes[r.layer].str().c_str(), r.fwd, r.bwd, total,
                  share(total), rate);
    }
    forward *= per;
    loss *= per;
    backward *= per;
    comm *= per;
    optimizer *= per;
    const auto line = [&](const char* what, double ms) {
      std::printf("  %-58s %9.3f %6.1f%%\n", what, ms, share(ms));
    };
    line("all layers: forward", fwd_sum);
    line("all layers: backward", bwd_sum);
    line("loss (softmax cross-entropy)", loss);
    line("all-reduce: wait after backward (1 rank: none)", comm);
    line("optimizer (SGD, Nesterov, weight decay)", optimizer);
    line("forward outside layers (gaps: launches, input wait)", forward - fwd_sum);
    line("backward outside layers (gaps: launches, hooks)", backward - bwd_sum);
    line("whole step (start -> end event)", whole);
    std::printf("  %-58s %9.3f  (throughput run, not synchronised per step)\n",
                "ms/step of the timed rounds", throughput_ms);
    std::fflush(stdout);
  }

  const Options& o_;
  CudaBackend& be_;
  ddp::comm::NcclComm* comm_;
  ddp::Shape input_;
  ddp::nn::Model net_;
  std::size_t xn_;
  float grad_scale_;
  std::unique_ptr<ddp::sync::GradientSync> sync_;
  PinnedBuffer host_x_[2], labels_;
  std::vector<std::int64_t> sample_ids_;  // 0..batch-1 (the same each step: uploaded once)
  DeviceBuffer dev_x_[2];
  ddp::Tensor dlogits_;
  std::unique_ptr<ddp::optim::Optimizer> opt_;
  EventId uploaded_ = 0, compute_mark_ = 0;
  std::uint64_t k_ = 0;  // steps taken (which slot holds the batch)
};

// --gate: rank 0 announces that `model` is ready for round `round` and reads a line; every rank
// learns whether it said "go".
bool gate_open(const std::string& model, int round, int rank) {
  int go = 0;
  if (rank == 0) {
    std::printf("{\"event\": \"ready\", \"model\": %s, \"round\": %d}\n",
                json_string(model).c_str(), round);
    std::fflush(stdout);
    std::string line;
    if (std::getline(std::cin, line)) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      go = line == "go" ? 1 : 0;
    }
  }
  MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return go == 1;
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
  copt.benchmark = o.algos == "timed";
  copt.cudnn_batch_norm = o.bn == "cudnn";
  copt.precision =
      o.precision == "bf16" ? ddp::backend::Precision::bf16 : ddp::backend::Precision::fp32;
  auto be = ddp::backend::make_cuda_backend(device, copt);
  std::unique_ptr<ddp::comm::NcclComm> comm;
  if (size > 1) comm = ddp::comm::make_nccl_comm(MPI_COMM_WORLD, device, be->compute_stream());

  const std::string versions = ddp::backend::cuda_versions();
  const char* algorithms = o.algos == "timed" ? "timing (cudnnFind), fastest deterministic"
                                              : "heuristics (_v7), deterministic first";
  const char* batch_norm = o.bn == "cudnn" ? "cuDNN" : "own kernels";
  if (rank == 0) {
    std::printf("gpu_bench: %d rank(s); rank 0 on %s (%s), %s\n", size, be->name().c_str(),
                info.pci_bus_id.c_str(), versions.c_str());
    std::printf(
        "  batch %lld per rank (global %lld), %lldx%lld inputs, %lld classes, SGD momentum 0.9 "
        "Nesterov weight decay 5e-4, %s, buckets %.1f MiB (first %.1f MiB), uploads %s, TF32 %s, "
        "precision %s, algorithms by %s, batch norm %s\n",
        static_cast<long long>(o.batch), static_cast<long long>(o.batch * size),
        static_cast<long long>(o.image), static_cast<long long>(o.image),
        static_cast<long long>(o.classes),
        size > 1 ? "NCCL all-reduce" : "no communication (1 rank)", o.bucket_mb, o.first_bucket_mb,
        o.upload ? "double-buffered" : "off (batches resident)", o.tf32 ? "on" : "off",
        o.precision.c_str(), algorithms, batch_norm);
    std::printf("  %-12s %5s %6s %6s %9s %11s %13s %11s %9s %s\n", "model", "ranks", "batch",
                "steps", "ms/step", "compute ms", "comm wait ms", "images/s", "GFLOP/s", "loss");
    std::fflush(stdout);
  }
  for (const auto& m : o.models) {
    ModelBench bench(m, o, *be, comm.get(), size);
    // Warm-up: plans (algorithm choice), workspace, NCCL connections, clocks.
    const double loss_first = bench.warm(std::max(o.warmup, 1));
    double last_ms = 0;
    for (int round = 0; round < o.rounds; ++round) {
      if (o.gate && !gate_open(m, round, rank)) break;
      if (round > 0 || o.gate) bench.warm(o.rewarm);
      Result r = bench.measure(size);
      r.loss_first = loss_first;
      // Rank 0 reports; the split is rank 0's (the slowest rank shows in everyone's comm wait).
      const double ms = 1000.0 * r.wall_s / std::max(r.steps, 1);
      last_ms = ms;
      if (rank != 0) continue;
      const double images = static_cast<double>(o.batch * size) * r.steps / r.wall_s;
      const double gflops = 3.0 * bench.net().forward_flops() * images / 1e9;
      std::printf("  %-12s %5d %6lld %6d %9.3f %11.3f %13.3f %11.1f %9.1f %.3f->%.3f\n", m.c_str(),
                  size, static_cast<long long>(o.batch), r.steps, ms, r.compute_ms, r.comm_ms,
                  images, gflops, r.loss_first, r.loss_last);
      if (o.csv)
        std::printf("csv,gpu,%s,%d,%lld,%d,%.4f,%.4f,%.4f,%.1f,%zu,%s\n", m.c_str(), size,
                    static_cast<long long>(o.batch), r.steps, ms, r.compute_ms, r.comm_ms, images,
                    bench.buckets(), o.precision.c_str());
      if (o.json)
        std::printf(
            "{\"event\": \"run\", \"side\": \"ours\", \"model\": %s, \"precision\": %s, "
            "\"tf32\": %s, \"algorithms\": %s, \"batch_norm\": %s, \"batch\": %lld, \"image\": "
            "%lld, \"classes\": "
            "%lld, \"ranks\": %d, \"round\": %d, \"steps\": %d, \"seconds\": %.6f, "
            "\"ms_per_step\": %.6f, \"images_per_s\": %.3f, \"compute_ms\": %.6f, \"comm_ms\": "
            "%.6f, \"loss_first\": %.6f, \"loss_last\": %.6f, \"params\": %lld, \"gpu\": %s, "
            "\"versions\": %s}\n",
            json_string(m).c_str(), json_string(o.precision).c_str(), o.tf32 ? "true" : "false",
            json_string(algorithms).c_str(), json_string(batch_norm).c_str(),
            static_cast<long long>(o.batch), static_cast<long long>(o.image),
            static_cast<long long>(o.classes), size, round, r.steps, r.wall_s, ms, images,
            r.compute_ms, r.comm_ms, r.loss_first, r.loss_last,
            static_cast<long long>(bench.net().num_parameters()), json_string(be->name()).c_str(),
            json_string(versions).c_str());
      std::fflush(stdout);
    }
    if (o.profile) bench.profile(o.profile_steps, m, last_ms);
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

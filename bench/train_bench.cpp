// ddp_bench: throughput of the real training step (nn::Model forward, softmax cross-entropy,
// nn::Model backward, optimizer step) on synthetic CIFAR-10-shaped data, for LeNet and a small
// VGG-style net, at several compute-thread counts. One process, no communication: this measures
// the compute backend, the number a data-parallel run multiplies by its ranks at best.
//
//   ddp_bench --model all --batch 256 --threads 1,2 --seconds 3 [--profile] [--csv]
//
// --profile adds a per-layer breakdown: the same layer specs are built through nn::make_layer (the
// code the Model runs) and every layer's forward and backward call is timed on its own.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/error.hpp"
#include "ddp/nn/layer_factory.hpp"
#include "ddp/nn/layout_plan.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/runtime/runtime.hpp"

namespace {

using ddp::Shape;
using ddp::Tensor;
using ddp::nn::LayerSpec;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kClasses = 10;
const Shape kInput{3, 32, 32};  // CIFAR-10

// ---------------------------------------------------------------------------------------------
// The two nets.

LayerSpec conv(const std::string& name, std::int64_t out, std::int64_t k, std::int64_t pad) {
  LayerSpec s;
  s.type = "conv2d";
  s.name = name;
  s.out_channels = out;
  s.kernel = k;
  s.padding = pad;
  return s;
}
LayerSpec linear(const std::string& name, std::int64_t out) {
  LayerSpec s;
  s.type = "linear";
  s.name = name;
  s.out_features = out;
  return s;
}
LayerSpec maxpool(const std::string& name, std::int64_t k) {
  LayerSpec s;
  s.type = "maxpool";
  s.name = name;
  s.kernel = k;
  return s;
}
LayerSpec simple(const std::string& type, const std::string& name) {
  LayerSpec s;
  s.type = type;
  s.name = name;
  return s;
}

std::vector<LayerSpec> lenet() {
  return {conv("conv1", 6, 5, 0),    simple("relu", "relu1"), maxpool("pool1", 2),
          conv("conv2", 16, 5, 0),   simple("relu", "relu2"), maxpool("pool2", 2),
          simple("flatten", "flat"), linear("fc1", 120),      simple("relu", "relu3"),
          linear("fc2", 84),         simple("relu", "relu4"), linear("fc3", kClasses)};
}

std::vector<LayerSpec> vgg() {
  return {conv("conv1", 32, 3, 1),   simple("relu", "relu1"), maxpool("pool1", 2),
          conv("conv2", 64, 3, 1),   simple("relu", "relu2"), maxpool("pool2", 2),
          simple("flatten", "flat"), linear("fc1", 512),      simple("relu", "relu3"),
          linear("fc2", kClasses)};
}

std::vector<LayerSpec> specs_of(const std::string& model) {
  return model == "lenet" ? lenet() : vgg();
}

// ---------------------------------------------------------------------------------------------
// Options, data, environment.

struct Options {
  std::string model = "all";
  std::int64_t batch = 256;
  std::vector<int> threads{1, 2};
  int warmup = 3;
  int steps = 0;         // 0: run for `seconds`
  double seconds = 3.0;  // per (model, threads)
  int min_steps = 3;
  bool profile = false;
  int profile_steps = 10;
  bool csv = false;
  std::uint64_t seed = 1;
  std::string command;  // the command line, for the report
};

// Fixed inputs ~ N(0, 1) (what normalised CIFAR looks like) and fixed labels.
struct Batch {
  Tensor x;
  std::vector<std::int32_t> labels;
  std::vector<std::int64_t> ids;
};

Batch make_batch(std::int64_t n, std::uint64_t seed) {
  Batch b;
  b.x = Tensor::zeros(kInput.with_batch(n));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::int64_t i = 0; i < b.x.numel(); ++i) b.x.data()[i] = normal(rng);
  std::uniform_int_distribution<std::int32_t> label(0, static_cast<std::int32_t>(kClasses) - 1);
  for (std::int64_t i = 0; i < n; ++i) b.labels.push_back(label(rng));
  b.ids.resize(static_cast<std::size_t>(n));
  std::iota(b.ids.begin(), b.ids.end(), std::int64_t{0});
  return b;
}

std::string shell_quote(const std::string& a) {
  if (!a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_=.,/:+@%") == std::string::npos)
    return a;
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  return "unknown";
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

ddp::optim::Options sgd_config() {
  ddp::optim::Options c;
  c.name = "sgd";
  c.lr = 0.01;
  c.momentum = 0.9;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Throughput of the real step.

struct Result {
  std::string model;
  int threads = 0;
  std::int64_t batch = 0;
  int steps = 0;
  double mean_ms = 0, median_ms = 0, min_ms = 0;
  double images_per_s = 0, gflops = 0;
  double fwd_mflop_per_sample = 0;
  std::int64_t params = 0;
  double loss_first = 0, loss_last = 0;
};

Result run_throughput(const std::string& name, int threads, const Options& o, const Batch& data) {
  // Threads first, then the backend and model: oneDNN sizes its primitives' work split by the
  // thread count at creation, as in ddp_train (configure_threads runs before the model is built).
  ddp::backend::set_compute_threads(threads);
  auto be = ddp::backend::make_cpu_backend();
  ddp::nn::Model model(specs_of(name), kInput, kClasses, *be);
  model.reserve(o.batch);
  model.init_parameters(o.seed);
  auto opt = ddp::optim::Optimizer::create(sgd_config(), *be, model.params().size());
  Tensor dlogits = Tensor::zeros(Shape{o.batch, kClasses});
  const float grad_scale = 1.0f / static_cast<float>(o.batch);
  ddp::nn::StepContext ctx;
  ctx.mode = ddp::nn::Mode::train;
  ctx.sample_ids = data.ids.data();
  const double lr = sgd_config().lr;

  std::uint64_t step_no = 0;
  auto step = [&]() {
    ctx.seed = ++step_no;
    const Tensor& logits = model.forward(data.x, ctx);
    auto loss = be->softmax_xent(o.batch, kClasses, logits.data(), data.labels.data(), 0.0f,
                                 grad_scale, dlogits.data());
    model.backward(dlogits);
    opt->step(model.params(), model.grads(), lr);
    return loss.loss_sum / static_cast<double>(o.batch);
  };

  Result r;
  r.model = name;
  r.threads = ddp::backend::compute_threads();
  r.batch = o.batch;
  r.params = model.num_parameters();
  r.fwd_mflop_per_sample = model.forward_flops() / 1e6;
  r.loss_first = step();
  for (int i = 1; i < o.warmup; ++i) step();

  std::vector<double> times;
  const auto start = Clock::now();
  while (true) {
    const auto t0 = Clock::now();
    r.loss_last = step();
    times.push_back(seconds_since(t0));
    const int done = static_cast<int>(times.size());
    if (o.steps > 0 ? done >= o.steps : done >= o.min_steps && seconds_since(start) >= o.seconds)
      break;
  }
  const double total = std::accumulate(times.begin(), times.end(), 0.0);
  r.steps = static_cast<int>(times.size());
  r.mean_ms = 1e3 * total / r.steps;
  std::sort(times.begin(), times.end());
  r.median_ms = 1e3 * times[times.size() / 2];
  r.min_ms = 1e3 * times.front();
  r.images_per_s = static_cast<double>(o.batch) * r.steps / total;
  // Training ~ 3x the forward FLOPs: forward, backward-data and backward-weights.
  r.gflops = 3.0 * model.forward_flops() * r.images_per_s / 1e9;
  if (!std::isfinite(r.loss_last))
    throw ddp::Error("ddp_bench: the loss of model '" + name + "' is not finite");
  return r;
}

// ---------------------------------------------------------------------------------------------
// Per-layer profile: the layers the Model would build, driven one by one with a timer around each.

struct LayerProfile {
  std::string name, type, out;
  double fwd_flops = 0;  // per sample
  double fwd_s = 0, bwd_s = 0;
};

void run_profile(const std::string& name, int threads, const Options& o, const Batch& data,
                 const Result& whole) {
  ddp::backend::set_compute_threads(threads);
  auto be = ddp::backend::make_cpu_backend();
  const auto specs = specs_of(name);
  const std::int64_t n = o.batch;

  std::vector<std::unique_ptr<ddp::nn::Layer>> layers;
  std::vector<Shape> out;  // per sample
  Shape shape = kInput;
  for (const auto& s : specs) {
    layers.push_back(ddp::nn::make_layer(s, *be));
    // The profiled nets are chains of one-input layers.
    shape = dynamic_cast<ddp::nn::UnaryLayer&>(*layers.back()).infer(shape);
    out.push_back(shape);
  }
  // The activation layouts the model gives them (nn/layout_plan.hpp), so the per-layer times add up
  // to the step's.
  ddp::nn::plan_layouts(layers, ddp::nn::plan_graph(layers, kInput), be->activation_block());

  // Flat parameter and gradient buffers (64-byte aligned tensors, as the Model lays them out).
  auto align = [](std::int64_t v) { return (v + 15) / 16 * 16; };
  std::int64_t total = 0;
  for (const auto& l : layers)
    for (const auto& p : l->param_specs()) total += align(p.shape.numel());
  Tensor params = Tensor::zeros(Shape{std::max<std::int64_t>(total, 1)});
  Tensor grads = Tensor::zeros(params.shape());
  std::mt19937_64 rng(o.seed);
  std::int64_t off = 0;
  for (const auto& l : layers) {
    std::vector<Tensor> p, g, b;
    for (const auto& ps : l->param_specs()) {
      p.push_back(Tensor::view(params.data() + off, ps.shape));
      g.push_back(Tensor::view(grads.data() + off, ps.shape));
      const float bound = ps.fan_in > 0 ? 1.0f / std::sqrt(static_cast<float>(ps.fan_in)) : 0.0f;
      std::uniform_real_distribution<float> u(-bound, bound);
      for (std::int64_t i = 0; i < ps.shape.numel(); ++i) p.back().data()[i] = u(rng);
      off += align(ps.shape.numel());
    }
    for (const auto& bs : l->buffer_specs()) b.push_back(Tensor::zeros(bs.shape));
    l->bind(p, g, b);
  }
  auto opt = ddp::optim::Optimizer::create(sgd_config(), *be, static_cast<std::size_t>(total));

  // Activations and their gradients; a view layer (flatten) reinterprets the layer below.
  const std::size_t L = layers.size();
  std::vector<Tensor> act(L), dact(L);
  std::vector<bool> has_dx(L, false);  // a non-view layer lies below: the input gradient is needed
  for (std::size_t i = 0; i < L; ++i) {
    const Shape s = out[i].with_batch(n);
    const Tensor& below = i == 0 ? data.x : act[i - 1];
    if (layers[i]->is_view()) {
      act[i] = below.reshaped(s);
      if (i > 0 && !dact[i - 1].empty()) dact[i] = dact[i - 1].reshaped(s);
    } else {
      act[i] = Tensor::zeros(s);
      dact[i] = Tensor::zeros(s);
    }
    has_dx[i] = i > 0 && !dact[i - 1].empty();
  }
  Tensor dlogits = Tensor::zeros(Shape{n, kClasses});

  ddp::nn::StepContext ctx;
  ctx.mode = ddp::nn::Mode::train;
  ctx.sample_ids = data.ids.data();
  std::vector<LayerProfile> prof(L);
  for (std::size_t i = 0; i < L; ++i)
    prof[i] = {
        layers[i]->name(), layers[i]->spec().type, out[i].str(), layers[i]->forward_flops(), 0, 0};
  double loss_s = 0, opt_s = 0;

  const int warm = std::max(1, o.warmup);
  for (int it = 0; it < warm + o.profile_steps; ++it) {
    const bool timed = it >= warm;
    ctx.seed = static_cast<std::uint64_t>(it) + 1;
    for (std::size_t i = 0; i < L; ++i) {
      const Tensor& x = i == 0 ? data.x : act[i - 1];
      const auto t0 = Clock::now();
      if (!layers[i]->is_view())
        dynamic_cast<ddp::nn::UnaryLayer&>(*layers[i]).forward(x, act[i], ctx);
      if (timed) prof[i].fwd_s += seconds_since(t0);
    }
    auto t0 = Clock::now();
    be->softmax_xent(n, kClasses, act[L - 1].data(), data.labels.data(), 0.0f,
                     1.0f / static_cast<float>(n), dlogits.data());
    if (timed) loss_s += seconds_since(t0);
    Tensor dy = dlogits;
    for (std::size_t i = L; i-- > 0;) {
      const Tensor& x = i == 0 ? data.x : act[i - 1];
      const auto t1 = Clock::now();
      if (!layers[i]->is_view())
        dynamic_cast<ddp::nn::UnaryLayer&>(*layers[i])
            .backward(x, act[i], dy, has_dx[i] ? &dact[i - 1] : nullptr);
      if (timed) prof[i].bwd_s += seconds_since(t1);
      if (i > 0) dy = dact[i - 1];
    }
    t0 = Clock::now();
    opt->step({params.data(), static_cast<std::size_t>(total)},
              {grads.data(), static_cast<std::size_t>(total)}, sgd_config().lr);
    if (timed) opt_s += seconds_since(t0);
  }

  const double k = 1e3 / o.profile_steps;  // seconds summed over steps -> ms per step
  double sum_ms = (loss_s + opt_s) * k;
  for (const auto& p : prof) sum_ms += (p.fwd_s + p.bwd_s) * k;
  std::printf("\nper-layer profile: %s, %d thread(s), batch %lld, %d steps (ms per step)\n",
              name.c_str(), threads, static_cast<long long>(n), o.profile_steps);
  std::printf("  %-8s %-8s %-10s %9s %9s %9s %6s %9s %9s\n", "layer", "type", "output", "fwd ms",
              "bwd ms", "total ms", "share", "fwd GF/s", "bwd GF/s");
  for (std::size_t i = 0; i < L; ++i) {
    const auto& p = prof[i];
    const double f = p.fwd_s * k, b = p.bwd_s * k;
    char fg[16] = "-", bg[16] = "-";
    if (p.type == "conv2d" || p.type == "linear") {
      const double flop = p.fwd_flops * static_cast<double>(n);
      std::snprintf(fg, sizeof fg, "%.1f", flop / (f * 1e6));
      // Backward = data gradient + weight gradient ~ 2x the forward work (no data gradient for the
      // first layer).
      const double bflop = (has_dx[i] ? 2.0 : 1.0) * flop;
      std::snprintf(bg, sizeof bg, "%.1f", bflop / (b * 1e6));
    }
    std::printf("  %-8s %-8s %-10s %9.3f %9.3f %9.3f %5.1f%% %9s %9s\n", p.name.c_str(),
                p.type.c_str(), p.out.c_str(), f, b, f + b, 100.0 * (f + b) / sum_ms, fg, bg);
  }
  std::printf("  %-28s %9s %9s %9.3f %5.1f%%\n", "loss (softmax_xent)", "", "", loss_s * k,
              100.0 * loss_s * k / sum_ms);
  std::printf("  %-28s %9s %9s %9.3f %5.1f%%\n", "optimizer (sgd, momentum)", "", "", opt_s * k,
              100.0 * opt_s * k / sum_ms);
  std::printf("  %-28s %9s %9s %9.3f\n", "sum of the above", "", "", sum_ms);
  std::printf("  %-28s %9s %9s %9.3f   (median of the throughput run)\n", "whole step, nn::Model",
              "", "", whole.median_ms);
}

// ---------------------------------------------------------------------------------------------

void print_header(const Options& o) {
  const auto v = dnnl::version();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::printf("ddp_bench: training-step throughput, synthetic CIFAR-10 (3x32x32, 10 classes)\n");
  std::printf("command : %s\n", o.command.c_str());
  std::printf("host    : %s, %s, %ld CPUs online\n", host, cpu_model().c_str(),
              sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("oneDNN  : %d.%d.%d, effective ISA %s\n", v->major, v->minor, v->patch,
              isa_name(dnnl::get_effective_cpu_isa()));
  std::string env;
  for (const char* k : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND", "OMP_PLACES"})
    if (const char* val = std::getenv(k))
      env += std::string(env.empty() ? "" : ", ") + k + "=" + val;
  std::printf("env     : %s\n", env.empty() ? "(no OpenMP variables set)" : env.c_str());
  std::printf("step    : forward, softmax cross-entropy, backward, SGD (lr 0.01, momentum 0.9)\n");
  if (o.steps > 0)
    std::printf("timing  : %d warm-up steps, then %d timed steps\n", o.warmup, o.steps);
  else
    std::printf("timing  : %d warm-up steps, then timed steps for %.1f s (at least %d)\n", o.warmup,
                o.seconds, o.min_steps);
}

void print_table(const std::vector<Result>& rs, const Options& o) {
  if (rs.empty()) return;
  const auto& f = rs.front();
  std::printf("\nmodel %s: %lld parameters, %.2f MFLOP forward per sample (training ~3x)\n",
              f.model.c_str(), static_cast<long long>(f.params), f.fwd_mflop_per_sample);
  std::printf("  %7s %6s %6s %10s %10s %10s %11s %9s %10s\n", "threads", "batch", "steps",
              "ms/step", "median ms", "min ms", "images/s", "GFLOP/s", "loss");
  for (const auto& r : rs)
    std::printf("  %7d %6lld %6d %10.3f %10.3f %10.3f %11.1f %9.2f %4.3f->%.3f\n", r.threads,
                static_cast<long long>(r.batch), r.steps, r.mean_ms, r.median_ms, r.min_ms,
                r.images_per_s, r.gflops, r.loss_first, r.loss_last);
  std::printf("  command: %s\n", o.command.c_str());
}

int run(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.command += (i ? " " : "") + shell_quote(argv[i]);

  CLI::App app{"ddp_bench: training throughput of the ddp_train CPU backend on synthetic data"};
  app.add_option("--model", o.model, "lenet | vgg | all")
      ->check(CLI::IsMember({"lenet", "vgg", "all"}))
      ->capture_default_str();
  app.add_option("--batch", o.batch, "samples per step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", o.threads, "compute thread counts to measure, e.g. 1,2")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed steps first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--steps", o.steps, "timed steps (0: run for --seconds)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--seconds", o.seconds, "timed seconds per model and thread count")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--profile", o.profile, "also print a per-layer forward/backward breakdown");
  app.add_option("--profile-steps", o.profile_steps, "timed steps of the per-layer profile")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--csv", o.csv,
               "also print one machine-readable line per result: "
               "csv,ddp,model,threads,batch,steps,ms_mean,ms_median,images_per_s,gflops");
  app.add_option("--seed", o.seed, "seed of the synthetic data and the weights")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  ddp::runtime::Runtime rt(&argc, &argv);
  if (rt.size() > 1)
    throw ddp::ConfigError("ddp_bench measures one process (" + std::to_string(rt.size()) +
                           " ranks were started); run it without mpirun/srun");

  print_header(o);
  const Batch data = make_batch(o.batch, o.seed);
  std::vector<std::string> models;
  if (o.model == "all")
    models = {"lenet", "vgg"};
  else
    models = {o.model};
  std::vector<Result> all;
  for (const auto& m : models) {
    std::vector<Result> rs;
    for (int t : o.threads) rs.push_back(run_throughput(m, t, o, data));
    print_table(rs, o);
    if (o.profile)
      for (std::size_t i = 0; i < rs.size(); ++i) run_profile(m, o.threads[i], o, data, rs[i]);
    all.insert(all.end(), rs.begin(), rs.end());
  }
  if (o.csv) {
    std::printf("\n");
    for (const auto& r : all)
      std::printf("csv,ddp,%s,%d,%lld,%d,%.4f,%.4f,%.2f,%.3f\n", r.model.c_str(), r.threads,
                  static_cast<long long>(r.batch), r.steps, r.mean_ms, r.median_ms, r.images_per_s,
                  r.gflops);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ddp_bench: error: %s\n", e.what());
    return 1;
  }
}

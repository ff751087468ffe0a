// Every element-wise activation the layer registry holds, forward and backward through its layer
// on the CPU backend, against PyTorch (tests/unit/torch_activations.py: torch 1.13's functional
// activations and autograd, in float64 on our float32 inputs). The inputs cover [-8, 8] in steps
// of 1/256, every kink included (0, 6), where the two must agree on which side's gradient
// applies. A registered activation without a torch counterpart in the script fails the test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ddp/backend/cpu_backend.hpp"
#include "ddp/nn/activation_fusion.hpp"
#include "ddp/nn/layer_factory.hpp"
#include "ddp/nn/layer_registry.hpp"
#include "gradcheck_util.hpp"
#include "python_oracle.hpp"

namespace ddp::nn {
namespace {

namespace fs = std::filesystem;

// A python3 with torch and numpy, or "".
std::string find_torch_python() {
  return ::ddp::testing::find_python_with("torch numpy");
}

template <typename T>
void write_all(const fs::path& p, const std::vector<T>& v) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()),
             static_cast<std::streamsize>(v.size() * sizeof(T)));
}

std::vector<double> read_doubles(const fs::path& p, std::size_t n) {
  std::vector<double> v(n);
  std::ifstream f(p, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(double)));
  EXPECT_TRUE(f.good()) << p;
  return v;
}

// The registered types whose layer is an element-wise activation (nn/activation_fusion.hpp).
std::vector<std::string> activation_types(backend::Backend& be) {
  std::vector<std::string> out;
  for (const auto& t : layer_registry()) {
    if (!t.required.empty()) continue;  // activations take no required keys
    LayerSpec s;
    s.type = std::string(t.type);
    s.name = "probe";
    if (dynamic_cast<FusableActivation*>(make_layer(s, be).get())) out.push_back(s.type);
  }
  return out;
}

TEST(ActivationTorch, EveryActivationMatchesPyTorch) {
  const std::string py = find_torch_python();
  if (py.empty()) GTEST_SKIP() << "no python3 with torch and numpy (apt install python3-torch)";
  auto be = backend::make_cpu_backend();
  const std::vector<std::string> types = activation_types(*be);
  ASSERT_GE(types.size(), 5u);  // relu, relu6, leaky_relu, gelu, silu at least

  std::vector<float> x;
  for (int i = -8 * 256; i <= 8 * 256; ++i) x.push_back(static_cast<float>(i) / 256.0f);
  const std::vector<float> dy = testing::random_vector(x.size(), 91, 0.5f, 1.5f);
  const float slope = 0.05f;
  const fs::path dir =
      fs::temp_directory_path() / ("ddp_activation_torch_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_all(dir / "x.f32", x);
  write_all(dir / "dy.f32", dy);
  std::ofstream(dir / "slope.txt") << slope;
  std::string cmd = py + " " DDP_SOURCE_DIR "/tests/unit/torch_activations.py " + dir.string();
  for (const auto& t : types) cmd += " " + t;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  const auto n = static_cast<std::int64_t>(x.size());
  const Shape shape{n};
  for (const auto& type : types) {
    SCOPED_TRACE(type);
    LayerSpec s;
    s.type = type;
    s.name = type;
    s.slope = slope;
    auto layer = make_layer(s, *be);
    layer->infer(std::span<const Shape>(&shape, 1));
    std::vector<float> y(x.size()), dx(x.size()), xin = x, g = dy;
    const Tensor xt = Tensor::view(xin.data(), shape.with_batch(1));
    const Tensor yt = Tensor::view(y.data(), shape.with_batch(1));
    const Tensor gt = Tensor::view(g.data(), shape.with_batch(1));
    const Tensor dxt = Tensor::view(dx.data(), shape.with_batch(1));
    layer->forward(std::span<const Tensor>(&xt, 1), yt, StepContext{});
    const Tensor* dxp = &dxt;
    layer->backward(std::span<const Tensor>(&xt, 1), yt, gt,
                    std::span<const Tensor* const>(&dxp, 1));

    const auto ref_y = read_doubles(dir / (type + ".y.f64"), x.size());
    const auto ref_dx = read_doubles(dir / (type + ".dx.f64"), x.size());
    // 2e-6 of |value| plus 1e-6 absolute, as ActivationValues (layer_gradcheck_test.cpp) allows
    // oneDNN's erf and exp polynomials; the others are float32 roundings of torch's values.
    auto check = [&](const std::vector<float>& got, const std::vector<double>& ref,
                     const char* what) {
      double worst = 0;
      std::size_t at = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        const double err = std::abs(got[i] - ref[i]) / (1e-6 + 2e-6 * std::abs(ref[i]));
        if (!(err <= worst)) worst = err, at = i;
      }
      EXPECT_LE(worst, 1.0) << what << " at x = " << x[at] << ": " << got[at] << ", torch "
                            << ref[at];
    };
    check(y, ref_y, "forward");
    check(dx, ref_dx, "backward");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ddp::nn

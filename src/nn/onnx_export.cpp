#include "ddp/nn/onnx_export.hpp"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <map>

#include "ddp/error.hpp"
#include "ddp/nn/graph.hpp"
#include "ddp/version_info.hpp"

namespace ddp::nn {
namespace {

// Builds the graph node by node; every layer becomes one or a few ONNX nodes whose last output
// is named after the layer.
class GraphBuilder {
 public:
  explicit GraphBuilder(onnx::GraphProto& g) : g_(g) {}

  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::string& output) {
    auto* n = g_.add_node();
    n->set_op_type(op);
    n->set_name(output + "/" + op);
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(output);
    return *n;
  }

  static void attr(onnx::NodeProto& n, const std::string& name, std::int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& name,
                   const std::vector<std::int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (const auto x : v) a->add_ints(x);
  }

  // A float initializer (a weight or a constant).
  const std::string& tensor(const std::string& name, const std::vector<std::int64_t>& dims,
                            const float* data, std::int64_t count) {
    auto* t = g_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (const auto d : dims) t->add_dims(d);
    // Raw little-endian bytes: the compact encoding every runtime reads.
    t->set_raw_data(std::string(reinterpret_cast<const char*>(data),
                                static_cast<std::size_t>(count) * sizeof(float)));
    return t->name();
  }
  std::string scalar(const std::string& name, float v) { return tensor(name, {}, &v, 1); }

 private:
  onnx::GraphProto& g_;
};

std::vector<std::int64_t> pair(const Extent2& e) {
  return {e.h, e.w};
}
// ONNX pads: [h_begin, w_begin, h_end, w_end].
std::vector<std::int64_t> pads(const Extent2& e) {
  return {e.h, e.w, e.h, e.w};
}

void add_value_info(onnx::ValueInfoProto& v, const std::string& name,
                    const std::vector<std::int64_t>& dims) {
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = t->mutable_shape();
  shape->add_dim()->set_dim_param("batch");
  for (const auto d : dims) shape->add_dim()->set_dim_value(d);
}

}  // namespace

std::string export_onnx(const Model& model, const std::string& graph_name,
                        const std::vector<std::pair<std::string, std::string>>& metadata) {
  onnx::ModelProto proto;
  proto.set_ir_version(onnx::IR_VERSION);
  proto.set_producer_name("ddp_train");
  proto.set_producer_version(DDP_VERSION_STRING);
  for (const auto& [key, value] : metadata) {
    auto* p = proto.add_metadata_props();
    p->set_key(key);
    p->set_value(value);
  }
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  auto& g = *proto.mutable_graph();
  g.set_name(graph_name);
  GraphBuilder b(g);

  // Each layer's parameters and buffers by their suffix ("weight", "running_mean", ...).
  std::vector<std::map<std::string, const NamedTensor*>> tensors(model.num_layers());
  for (const auto* list : {&model.named_params(), &model.named_buffers()})
    for (const auto& t : *list) {
      const auto dot = t.name.rfind('.');
      tensors[t.layer][t.name.substr(dot + 1)] = &t;
    }
  auto weight = [&](std::size_t i, const std::string& suffix) -> std::string {
    const auto it = tensors[i].find(suffix);
    if (it == tensors[i].end()) return {};
    const NamedTensor& t = *it->second;
    return b.tensor(t.name, t.tensor.shape().dims(), t.tensor.data(), t.tensor.numel());
  };

  add_value_info(*g.add_input(), "input", model.input_shape().dims());
  std::vector<std::string> outputs(model.num_layers());
  for (std::size_t i = 0; i < model.num_layers(); ++i) {
    const Layer& layer = model.layer(i);
    const LayerSpec& s = layer.spec();
    std::vector<std::string> in;
    for (const int p : model.layer_inputs(i))
      in.push_back(p == kModelInput ? std::string("input") : outputs[static_cast<std::size_t>(p)]);
    // The graph's own input and output names stay free.
    const std::string out = s.name == "input" || s.name == "logits" ? s.name + "/out" : s.name;
    const std::string& t = s.type;
    if (t == "conv2d") {
      in.push_back(weight(i, "weight"));
      if (const auto bias = weight(i, "bias"); !bias.empty()) in.push_back(bias);
      auto& n = b.node("Conv", in, out);
      b.attr(n, "kernel_shape", pair(s.kernel));
      b.attr(n, "strides", pair(s.stride.h > 0 ? s.stride : Extent2{1}));
      b.attr(n, "pads", pads(s.padding));
      b.attr(n, "dilations", pair(s.dilation));
      b.attr(n, "group", s.groups);
    } else if (t == "linear") {
      // Our linear flattens each sample itself; Gemm wants [N, features].
      b.node("Flatten", in, out + "/flat");
      std::vector<std::string> gin = {out + "/flat", weight(i, "weight")};
      if (const auto bias = weight(i, "bias"); !bias.empty()) gin.push_back(bias);
      auto& n = b.node("Gemm", gin, out);
      b.attr(n, "transB", std::int64_t{1});
    } else if (t == "batchnorm") {
      in.push_back(weight(i, "weight"));
      in.push_back(weight(i, "bias"));
      in.push_back(weight(i, "running_mean"));
      in.push_back(weight(i, "running_var"));
      auto& n = b.node("BatchNormalization", in, out);
      b.attr(n, "epsilon", s.eps);
    } else if (t == "relu") {
      b.node("Relu", in, out);
    } else if (t == "relu6") {
      b.node("Clip", {in[0], b.scalar(out + "/min", 0.0f), b.scalar(out + "/max", 6.0f)}, out);
    } else if (t == "leaky_relu") {
      b.attr(b.node("LeakyRelu", in, out), "alpha", s.slope);
    } else if (t == "gelu") {
      // The exact form, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)): opset 17 has no Gelu yet.
      b.node("Div", {in[0], b.scalar(out + "/sqrt2", static_cast<float>(std::sqrt(2.0)))},
             out + "/scaled");
      b.node("Erf", {out + "/scaled"}, out + "/erf");
      b.node("Add", {out + "/erf", b.scalar(out + "/one", 1.0f)}, out + "/one_plus");
      b.node("Mul", {in[0], out + "/one_plus"}, out + "/x_one_plus");
      b.node("Mul", {out + "/x_one_plus", b.scalar(out + "/half", 0.5f)}, out);
    } else if (t == "silu") {
      b.node("Sigmoid", in, out + "/sigmoid");
      b.node("Mul", {in[0], out + "/sigmoid"}, out);
    } else if (t == "maxpool" || t == "avgpool") {
      auto& n = b.node(t == "maxpool" ? "MaxPool" : "AveragePool", in, out);
      b.attr(n, "kernel_shape", pair(s.kernel));
      b.attr(n, "strides", pair(s.stride.h > 0 ? s.stride : s.kernel));
      b.attr(n, "pads", pads(s.padding));
      b.attr(n, "ceil_mode", std::int64_t{0});
      // Our average excludes the padding from the count (oneDNN's avg_exclude_padding).
      if (t == "avgpool") b.attr(n, "count_include_pad", std::int64_t{0});
    } else if (t == "global_avgpool") {
      b.node("GlobalAveragePool", in, out + "/pooled");
      b.node("Flatten", {out + "/pooled"}, out);
    } else if (t == "flatten") {
      b.node("Flatten", in, out);
    } else if (t == "dropout") {
      b.node("Identity", in, out);
    } else if (t == "add") {
      b.node("Sum", in, out);
    } else if (t == "concat") {
      b.attr(b.node("Concat", in, out), "axis", std::int64_t{1});
    } else {
      throw Error("ONNX export: layer '" + s.name + "' has type '" + t +
                  "', which the exporter does not know");
    }
    outputs[i] = out;
  }
  // The logits under a fixed name, whatever the last layer is called.
  b.node("Identity", {outputs.back()}, "logits");
  add_value_info(*g.add_output(), "logits", {model.num_classes()});

  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception& e) {
    throw Error(std::string("ONNX export: the ONNX checker refuses the graph: ") + e.what());
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) throw Error("ONNX export: serialising the model failed");
  return bytes;
}

}  // namespace ddp::nn

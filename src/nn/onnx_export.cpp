#include "ddp/nn/onnx_export.hpp"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <variant>

#include "ddp/error.hpp"
#include "ddp/nn/graph.hpp"
#include "ddp/nn/layer_registry.hpp"
#include "ddp/nn/onnx_layer.hpp"
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

// One layer's view of the graph (nn/onnx_layer.hpp), handed to its type's export.
class LayerNodes final : public OnnxLayer {
 public:
  LayerNodes(GraphBuilder& b, const LayerSpec& spec, std::vector<std::string> inputs,
             std::string output, std::function<std::string(const std::string&)> weight)
      : b_(b),
        spec_(spec),
        inputs_(std::move(inputs)),
        output_(std::move(output)),
        weight_(std::move(weight)) {}

  const LayerSpec& spec() const override { return spec_; }
  const std::vector<std::string>& inputs() const override { return inputs_; }
  const std::string& output() const override { return output_; }
  std::string weight(const std::string& suffix) override { return weight_(suffix); }
  std::string scalar(const std::string& name, float value) override {
    return b_.scalar(name, value);
  }
  using OnnxLayer::node;
  void node(const std::string& op, const std::vector<std::string>& inputs,
            const std::string& output, const std::vector<OnnxAttr>& attrs) override {
    onnx::NodeProto& n = b_.node(op, inputs, output);
    for (const auto& a : attrs)
      std::visit([&](const auto& v) { GraphBuilder::attr(n, a.name, v); }, a.value);
  }

 private:
  GraphBuilder& b_;
  const LayerSpec& spec_;
  std::vector<std::string> inputs_;
  std::string output_;
  std::function<std::string(const std::string&)> weight_;
};

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
    const LayerSpec& s = model.layer(i).spec();
    std::vector<std::string> in;
    for (const int p : model.layer_inputs(i))
      in.push_back(p == kModelInput ? std::string("input") : outputs[static_cast<std::size_t>(p)]);
    // The graph's own input and output names stay free.
    const std::string out = s.name == "input" || s.name == "logits" ? s.name + "/out" : s.name;
    const LayerType* type = find_layer_type(s.type);
    if (!type)
      throw Error("ONNX export: layer '" + s.name + "' has type '" + s.type +
                  "', which no layer file registers");
    LayerNodes nodes(b, s, std::move(in), out,
                     [&](const std::string& suffix) { return weight(i, suffix); });
    type->onnx(nodes);
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

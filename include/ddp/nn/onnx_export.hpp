#pragma once
// A trained model as an ONNX graph (opset kOnnxOpset), built with the ONNX project's own protobuf
// definitions (Debian's libonnx-dev) and checked by its checker (onnx::checker::check_model)
// before anything is written. Inference form: batch norm uses its running statistics, dropout is
// an identity. Input "input" [N, C, H, W] (N symbolic: "batch"), output "logits" [N, classes].
#include <string>
#include <utility>
#include <vector>

#include "ddp/nn/model.hpp"

namespace ddp::nn {

inline constexpr int kOnnxOpset = 17;

// The serialised ModelProto (the bytes of a .onnx file). Reads the model's host mirrors (call
// model.pull_state() first on a GPU). Each layer's nodes come from its type's registration
// (LayerType::onnx, nn/layer_registry.hpp). `metadata`: the model's metadata_props (key, value),
// what onnxruntime's InferenceSession reports as its custom metadata. Throws Error for a graph the
// ONNX checker refuses (with the checker's message).
std::string export_onnx(const Model& model, const std::string& graph_name,
                        const std::vector<std::pair<std::string, std::string>>& metadata = {});

}  // namespace ddp::nn

#pragma once
// train.init: a new run's model starts from the tensors of a weights file
// (scripts/torch_to_snapshot.py) or of any run's snapshot of the same model - fine-tuning. Not a
// resume: no optimizer state, position or run identity is taken, only parameters and batch-norm
// statistics. The model's head (its last layer with parameters: fc, classifier.1) keeps its seeded
// initialisation when its shapes differ from the file's (another class count); every other tensor
// must match by name and shape.
#include <string>
#include <vector>

#include "ddp/ckpt/snapshot.hpp"
#include "ddp/nn/model.hpp"

namespace ddp::ckpt {

struct InitReport {
  std::string file;           // as given
  std::string kind;           // the file's: kSnapshotKind or kWeightsKind
  std::string imported_from;  // a weights file's .pth
  std::size_t loaded = 0;     // model tensors taken from the file (all but the re-initialised)
  // "fc.weight [5, 512]": the model's head tensors left at their initialisation, and the file's
  // head tensors not used.
  std::vector<std::string> reinitialised, left_out;

  // The start-up line: what was loaded, re-initialised and left out, and from what.
  std::string line() const;
};

// Copies s's tensors into the model's host mirrors and pushes them to its backend (call after
// init_parameters, which gives the head its initialisation). All or nothing: a tensor missing
// from the file, one the model does not have, or a shape that differs outside the head is a
// ConfigError naming each (and hinting at model.stem / model.preset), and the model is unchanged.
InitReport init_from(const Snapshot& s, nn::Model& model);

// Why a weights file (meta.kind == kWeightsKind) cannot be resumed, and what to do instead: the
// message of every reader that continues a run.
std::string weights_file_not_resumable(const std::string& file, const SnapshotMeta& meta);

}  // namespace ddp::ckpt

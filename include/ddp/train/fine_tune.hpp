#pragma once
// The parameters' set-up for training, fine-tuning's included (docs/finetuning.md): train.freeze,
// resolved on the model before the optimizer is built (it keeps no state for frozen parameters),
// the optimizer over [[optim.groups]], and train.init, loaded into a new run's model on every
// rank. What they did goes into the start-up lines.
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ddp/comm/communicator.hpp"
#include "ddp/nn/model.hpp"
#include "ddp/optim/optimizer.hpp"
#include "ddp/sync/gradient_sync.hpp"
#include "ddp/train/options.hpp"

namespace ddp::train {

// Freezes the parameters train.freeze names, batch norm as train.frozen_bn says
// (nn::Model::freeze). ConfigError naming a pattern that matches no parameter, and when every
// parameter would be frozen. Nothing happens without train.freeze.
void freeze_parameters(nn::Model& model, const Options& train);

// The optimizer over the model's parameters: optim.groups and no_decay_norm_bias as update runs,
// frozen parameters in none (optim/param_groups.hpp). ConfigError for a group that matches nothing.
std::unique_ptr<optim::Optimizer> make_optimizer(const optim::Options& cfg, backend::Backend& be,
                                                 const nn::Model& model);

// "freeze: 30 of 62 parameter tensors frozen (683072 values; 10 batch norms in eval mode);
// 10496005 values train; all-reduced per step: 10496016 floats in 6 buckets (of 11179088)", or ""
// when nothing is frozen. The bucket sizes are the gradient sync's: what travels.
std::string freeze_line(const nn::Model& model, const std::vector<sync::Bucket>& buckets);

// train.init for a run that starts afresh: rank 0 reads `file` and loads its tensors into its
// model (ckpt::init_from: a head of another class count re-initialised), then every rank takes
// rank 0's weights. Collective; rank 0's error (a missing file, a model that does not fit) is its
// own, the others throw "rank 0 could not load train.init". Returns rank 0's "init: ..." line
// ("" on the others).
std::string load_init_weights(nn::Model& model, const std::string& file, comm::Communicator& comm);
// load_init_weights when `file` is not "": prints its line to `out`; returns `file`.
std::string apply_init(nn::Model& model, const std::string& file, comm::Communicator& comm,
                       std::ostream& out);

}  // namespace ddp::train

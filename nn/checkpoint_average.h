// Checkpoint averaging: the element-wise mean of the weights of several checkpoints of one run,
// a cheap ensemble that usually decodes better than the last checkpoint alone (Vaswani et al.
// 2017 average the last 5 or 20 checkpoints; fairseq's average_checkpoints.py does the same).
//
//   auto files = nn::run_checkpoint_models("runs/bible", 5);   // the newest 5, newest first
//   nn::save_safetensors("runs/bible/model_avg5.safetensors", nn::average_checkpoints(files));
//
// `graft average` (tools/cmd_average.cpp) is the command-line form.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"

namespace graft::nn {

// The model files of run_dir's checkpoint step directories (run_dir/checkpoint/step-N/
// model.safetensors, nn/trainer.h), newest step first, at most `last` of them. graft::Error
// when run_dir has no checkpoint directory with a model file, or last < 1.
std::vector<std::string> run_checkpoint_models(const std::string& run_dir, int64_t last);

// Loads every file and returns, per tensor, the mean over the files: floating tensors summed in
// float64 and stored back in their own dtype; integer and bool tensors are not averaged, they
// must be equal in every file. Tensors come in the first file's order. graft::Error (naming the
// file and the tensor) when a file is unreadable or the files differ in tensor names, shapes or
// dtypes; nothing is written.
NamedTensors average_checkpoints(const std::vector<std::string>& paths);

}  // namespace graft::nn

// --device for the train commands: the training steps run on the device (model parameters,
// optimizer state and batches live there); decoding for validation and test runs on the CPU.
#pragma once
#include <cstdlib>
#include <string>

#include "autograd/tensor.h"
#include "data/batching.h"
#include "nn/module.h"

namespace graft::tools {

// --device if given, else $GRAFT_DEVICE, else the CPU (graft::Error for a bad name).
inline Device train_device(const std::string& flag) {
  const char* env = std::getenv("GRAFT_DEVICE");
  return Device::parse(!flag.empty() ? flag : env ? env : "cpu");
}

// The batch's tensors moved to dev.
inline data::Seq2SeqBatch batch_on(data::Seq2SeqBatch b, Device dev) {
  if (dev.is_cpu()) return b;
  for (Tensor* t : {&b.src, &b.src_lengths, &b.src_key_padding_mask, &b.tgt_in, &b.tgt_out, &b.tgt_lengths})
    if (t->defined()) *t = t->to(dev);
  return b;
}

// f() with the model's parameters on the CPU (decoding builds host tensors), then back on dev.
template <class F> auto with_model_on_cpu(nn::Module& m, Device dev, F f) {
  if (dev.is_cpu()) return f();
  m.to(Device::cpu());
  auto r = f();
  m.to(dev);
  return r;
}

}  // namespace graft::tools

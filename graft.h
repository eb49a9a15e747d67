// graft — the umbrella header: `#include "graft.h"` gives the whole public API.
//
//   ops/       devices, dtypes, shapes, errors, random streams (kernels live behind ops/kernels.h)
//   autograd/  Tensor and its factories, the differentiable ops, the tape (Node, backward),
//              grad mode, gradcheck and the op table; static expression graphs (ct, fuse)
//   nn/        Module, layers, init, losses, optimisers, schedulers, clipping, safetensors
#pragma once

#include "ops/device.h"
#include "ops/dtype.h"
#include "ops/error.h"
#include "ops/random.h"
#include "ops/shape.h"

#include "autograd/functions.h"
#include "nn/conv.h"  // also autograd/conv.h: conv1d, pooling (issue 9)
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/op_table.h"
#include "autograd/tensor.h"
#include "autograd/ct.h"
#include "autograd/fuse.h"

#include "nn/clip.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/safetensors.h"
#include "nn/scheduler.h"
#include "nn/rnn.h"            // RNN/LSTM/GRU (issue 5)
#include "nn/rnn_attention.h"  // Bahdanau, Luong, local, hard attention (issue 5)
#include "models/seq2seq.h"  // also data/batching.h, models/decoding.h (issue 5)
#include "nn/transformer.h"  // also nn/attention.h, autograd/attention.h (issue 6)

// graft — the umbrella header: `#include "graft.h"` (installed: `#include <graft.h>`) gives the
// whole public API. Include the single headers instead to compile faster.
//
//   ops/       devices, dtypes, shapes, errors, random streams (kernels live behind ops/kernels.h)
//   autograd/  Tensor and its factories, the differentiable ops, the tape (Node, backward), grad
//              mode, gradcheck and the op table; static expression graphs (ct, fuse), traced steps
//              (compile), bf16 autocast
//   nn/        Module, layers, recurrent layers and attention, Transformer blocks, KV cache, init,
//              losses, optimisers, schedulers, clipping, safetensors, the Trainer, data parallel
//   data/      tokenizers (char, word, WordPiece), datasets, batching, BLEU, BERT pretraining data
//   models/    Seq2Seq and decoding, Transformer, GPT, BERT (+ heads, Hugging Face I/O), ABCNN
#pragma once

#include "ops/device.h"
#include "ops/dtype.h"
#include "ops/error.h"
#include "ops/random.h"
#include "ops/shape.h"

#include "autograd/attention.h"
#include "autograd/autocast.h"
#include "autograd/compile.h"
#include "autograd/conv.h"
#include "autograd/ct.h"
#include "autograd/functions.h"
#include "autograd/fuse.h"
#include "autograd/fuse_multi.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "autograd/op_table.h"
#include "autograd/tensor.h"

#include "nn/attention.h"
#include "nn/checkpoint_average.h"
#include "nn/clip.h"
#include "nn/conv.h"
#include "nn/distributed.h"
#include "nn/init.h"
#include "nn/interrupt.h"
#include "nn/kv_cache.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/rnn.h"
#include "nn/rnn_attention.h"
#include "nn/safetensors.h"
#include "nn/scheduler.h"
#include "nn/trainer.h"
#include "nn/transformer.h"

#include "data/batching.h"
#include "data/bert_pretraining.h"
#include "data/bleu.h"
#include "data/english_text.h"
#include "data/pairs.h"
#include "data/parallel_corpus.h"
#include "data/seq2seq_tasks.h"
#include "data/spirals.h"
#include "data/tokenizer.h"
#include "data/wordnet_lexnames.h"
#include "data/wordpiece.h"

#include "models/abcnn.h"
#include "models/bert.h"
#include "models/bert_heads.h"
#include "models/bert_hf.h"
#include "models/decoding.h"
#include "models/gpt.h"
#include "models/seq2seq.h"
#include "models/transformer.h"

// The op table: one entry per differentiable (or not) op, defined next to the op itself (each
// autograd/ops_*.cpp file appends its entries). From it come the op's name, the devices that
// have kernels for it, and its test cases: the test suite enumerates it and runs gradcheck (and
// fast-vs-reference kernel comparison) on every case; an op with no case fails the suite.
//
// Rules for op authors:
//  * outputs start uninitialised; kernels write them; input gradients accumulate (the engine
//    adds the gradients a backward function returns);
//  * every backward body has a one-line math comment (`// dx = dy * (1 - y*y)`);
//  * backward functions are built from differentiable ops (so double backward works) unless
//    ctx.create_graph is false and a fused kernel is faster;
//  * composite ops first, fused kernels when a benchmark shows they pay.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "ops/kernels.h"

namespace graft {

struct OpCase {
  std::string label;                // e.g. "broadcast [3,1] x [4]"
  std::vector<Tensor> inputs;       // float64; those with requires_grad are checked
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  bool double_backward = true;      // also run gradgradcheck
  double eps = 1e-6;                // finite-difference step
  double atol = 1e-5;               // gradcheck tolerances
};

struct OpInfo {
  const char* name;
  bool differentiable;
  // Whether a back-end has every kernel this op needs.
  std::function<bool(const Backend&)> has_kernels;
  // Test cases (float64 inputs drawn from gen); empty = no gradcheck case (the suite fails).
  std::function<std::vector<OpCase>(Generator& gen)> cases;
};

const std::vector<OpInfo>& op_table();
const OpInfo* find_op(const std::string& name);

// Registration hooks, one per autograd/ops_*.cpp file.
void register_elementwise_ops(std::vector<OpInfo>& t);
void register_shape_ops(std::vector<OpInfo>& t);
void register_reduce_ops(std::vector<OpInfo>& t);
void register_linalg_ops(std::vector<OpInfo>& t);
void register_norm_ops(std::vector<OpInfo>& t);
void register_index_ops(std::vector<OpInfo>& t);
void register_loss_ops(std::vector<OpInfo>& t);
void register_random_ops(std::vector<OpInfo>& t);
void register_fused_ops(std::vector<OpInfo>& t);
void register_conv_ops(std::vector<OpInfo>& t);  // autograd/ops_conv.cpp
void register_attention_ops(std::vector<OpInfo>& t);  // autograd/ops_attention.cpp
void register_rnn_ops(std::vector<OpInfo>& t);  // autograd/ops_rnn.cpp

}  // namespace graft

// CPU kernels: the fast versions (xsimd, OpenMP, oneDNN) in namespace graft::cpu and the
// scalar reference versions in graft::cpu::ref. Each family lives in one .cpp file with both.
// Signatures and contracts: see the Backend table in ops/kernels.h.
#pragma once
#include "ops/kernels.h"

namespace graft::cpu {

// Work below this many elements runs on one thread (no OpenMP fork cost for tiny tensors).
inline constexpr int64_t kParallelGrain = 32768;

#define GRAFT_CPU_KERNEL_DECLS                                                                   \
  void fill(const TensorView& dst, double value);                                                \
  void copy(const TensorView& dst, const TensorView& src);                                       \
  void unary(UnaryOp op, double alpha, const TensorView& x, const TensorView& out);              \
  void unary_backward(UnaryOp op, double alpha, const TensorView& x, const TensorView& y,        \
                      const TensorView& dy, const TensorView& dx);                               \
  void binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out);     \
  void compare(CompareOp op, const TensorView& a, const TensorView& b, const TensorView& out);   \
  void where(const TensorView& cond, const TensorView& a, const TensorView& b,                   \
             const TensorView& out);                                                             \
  void reduce(ReduceOp op, const TensorView& x, const TensorView& out);                          \
  void matmul(const TensorView& a, const TensorView& b, const TensorView& out);                  \
  void linear(const TensorView& x, const TensorView& w, const TensorView& bias,                  \
              const TensorView& out);                                                            \
  void softmax(const TensorView& x, const TensorView& y, bool log);                              \
  void softmax_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,         \
                        bool log);                                                               \
  void layer_norm(const TensorView& x, const TensorView& gamma, const TensorView& beta,          \
                  double eps, const TensorView& y, const TensorView& mean,                       \
                  const TensorView& rstd);                                                       \
  void layer_norm_backward(const TensorView& x, const TensorView& gamma, const TensorView& mean, \
                           const TensorView& rstd, const TensorView& dy, const TensorView& dx,   \
                           const TensorView& dgamma, const TensorView& dbeta);                   \
  void index_select(const TensorView& src, int dim, const TensorView& index,                     \
                    const TensorView& out);                                                      \
  void index_add(const TensorView& dst, int dim, const TensorView& index,                        \
                 const TensorView& src);                                                         \
  void gather(const TensorView& src, int dim, const TensorView& index, const TensorView& out);   \
  void scatter_add(const TensorView& dst, int dim, const TensorView& index,                      \
                   const TensorView& src);                                                       \
  void cross_entropy(const TensorView& logits, const TensorView& target, int64_t ignore_index,   \
                     double label_smoothing, const TensorView& loss, const TensorView& logp);    \
  void cross_entropy_backward(const TensorView& logp, const TensorView& target,                  \
                              int64_t ignore_index, double label_smoothing,                      \
                              const TensorView& dloss, const TensorView& dlogits);               \
  void uniform(const TensorView& out, uint64_t seed, uint64_t offset);                           \
  void normal(const TensorView& out, uint64_t seed, uint64_t offset);                            \
  void adam_step(const TensorView& param, const TensorView& grad, const TensorView& m,           \
                 const TensorView& v, const AdamStepArgs& a);                                    \
  void sgd_step(const TensorView& param, const TensorView& grad, const TensorView& buf,          \
                const SgdStepArgs& a);                                                           \
  void adagrad_step(const TensorView& param, const TensorView& grad, const TensorView& sum,      \
                    const AdagradStepArgs& a);                                                    \
  void attention(const TensorView& q, const TensorView& k, const TensorView& v,                  \
                 const TensorView& mask, const AttentionArgs& a, const TensorView& out,          \
                 const TensorView& lse);                                                         \
  void attention_backward(const TensorView& q, const TensorView& k, const TensorView& v,         \
                          const TensorView& mask, const AttentionArgs& a, const TensorView& out, \
                          const TensorView& lse, const TensorView& dout, const TensorView& dq,   \
                          const TensorView& dk, const TensorView& dv);                   \
  void conv1d(const TensorView& x, const TensorView& w, const TensorView& bias,                  \
              const Conv1dArgs& a, const TensorView& out);                                       \
  void conv1d_backward_input(const TensorView& dy, const TensorView& w, const Conv1dArgs& a,     \
                             const TensorView& dx);                                              \
  void conv1d_backward_weight(const TensorView& x, const TensorView& dy, const Conv1dArgs& a,    \
                              const TensorView& dw, const TensorView& dbias);                    \
  void pool1d(const TensorView& x, const Pool1dArgs& a, const TensorView& out,                   \
              const TensorView& indices);                                                        \
  void pool1d_backward(const TensorView& dy, const TensorView& indices, const Pool1dArgs& a,     \
                       const TensorView& dx);

GRAFT_CPU_KERNEL_DECLS
namespace ref {
GRAFT_CPU_KERNEL_DECLS
}

}  // namespace graft::cpu

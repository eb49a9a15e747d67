// One op-table case (autograd/op_table.h) run on fresh copies of its inputs: the output and the
// gradients of sum(y * v) for a fixed random v. The reference-vs-fast suite (test_op_table.cpp)
// and the OpenCL-vs-CPU suite (test_opencl.cpp) compare two such runs.
#pragma once
#include <vector>

#include "autograd/functions.h"
#include "autograd/node.h"
#include "autograd/op_table.h"

namespace graft::test {

// Fresh leaves with the same values, floating ones converted to dtype, on device d.
inline std::vector<Tensor> inputs_on(const std::vector<Tensor>& in, DType dt, Device d) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) {
    Tensor c = is_floating(t.dtype()) ? t.detach().to(dt) : t.detach();
    c = c.to(d).clone();
    if (t.requires_grad()) c.requires_grad_(true);
    out.push_back(c);
  }
  return out;
}

struct CaseRun {
  std::vector<double> y;
  std::vector<std::vector<double>> grads;  // one per input that requires grad (empty: none)
};

inline CaseRun run_op_case(const OpCase& c, DType dt, Device d = Device::cpu()) {
  std::vector<Tensor> in = inputs_on(c.inputs, dt, d);
  Tensor y = c.fn(in);
  CaseRun r;
  r.y = y.to_vector<double>();
  if (!y.requires_grad()) return r;
  Generator g(99);
  Tensor v = uniform(y.shape(), 0.5, 1.5, TensorOptions(y.dtype()), &g).to(y.device());
  std::vector<Tensor> wrt;
  for (const Tensor& t : in)
    if (t.requires_grad()) wrt.push_back(t);
  for (const Tensor& gr : grad({y}, wrt, {v}, false, false, true))
    r.grads.push_back(gr.defined() ? gr.to_vector<double>() : std::vector<double>());
  return r;
}

}  // namespace graft::test

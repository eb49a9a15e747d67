// The smallest graft program: a tensor, backward(), a gradient. Built with nothing but
// `pkg-config --cflags --libs graft` or as a Meson subproject (tests/packaging/check.sh).
#include <cstdio>
#include <graft.h>
#ifndef _OPENMP
#error "graft's headers need -fopenmp (pkg-config --cflags graft adds it)"
#endif
using namespace graft;

int main() {
  Tensor x = tensor({1.0, 2.0, 3.0}, TensorOptions().requires_grad());
  sum(x * x).backward();                                 // d/dx sum(x^2) = 2x
  std::printf("x.grad = %s\n", x.grad().str().c_str());  // [2, 4, 6]
  ct::Var<0> v;
  Tensor y = fuse(v * v, "square")(x);  // a fused node: fuse.h's OpenMP loops compile here
  std::printf("square = %s\n", y.str().c_str());
}

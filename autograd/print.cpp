// Tensor printing with fmt, in the style of torch's repr (long dims are summarised with ...).
#include <cmath>

#include "autograd/node.h"
#include "autograd/tensor.h"

namespace graft {

namespace {
void print_dim(std::string& out, const std::vector<double>& v, const Shape& s, int d, int64_t off,
               int64_t stride_of_d, bool is_int, int indent) {
  int64_t n = s[d];
  int64_t inner = 1;
  for (int i = d + 1; i < s.size(); ++i) inner *= s[i];
  out += '[';
  bool summarise = n > 6 && v.size() > 1000;
  for (int64_t i = 0; i < n; ++i) {
    if (summarise && i == 3) {
      out += d + 1 == s.size() ? "..., " : "...,\n" + std::string(indent + 1, ' ');
      i = n - 3;
    }
    int64_t o = off + i * inner;
    if (d + 1 == s.size()) {
      out += is_int ? fmt::format("{}", int64_t(v[o])) : fmt::format("{:.4f}", v[o]);
    } else {
      print_dim(out, v, s, d + 1, o, inner, is_int, indent + 1);
    }
    if (i + 1 < n) out += d + 1 == s.size() ? ", " : ",\n" + std::string(indent + 1, ' ');
  }
  out += ']';
  (void)stride_of_d;
}
}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::vector<double> v = to_vector<double>();
  bool is_int = dtype() == DType::i64 || dtype() == DType::b8;
  std::string body;
  if (dim() == 0)
    body = is_int ? fmt::format("{}", int64_t(v[0])) : fmt::format("{:.4f}", v[0]);
  else
    print_dim(body, v, shape(), 0, 0, 0, is_int, 7);
  std::string extra;
  if (dtype() != DType::f32) extra += fmt::format(", dtype={}", dtype());
  if (!device().is_cpu()) extra += fmt::format(", device={}", device().str());
  if (grad_fn()) extra += fmt::format(", grad_fn={}", grad_fn()->name());
  else if (requires_grad()) extra += ", requires_grad=true";
  return fmt::format("tensor({}{})", body, extra);
}

}  // namespace graft

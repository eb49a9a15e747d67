// Op-table entries for fused static-graph nodes (graft::fuse): gradcheck of one fused
// elementwise node with broadcasting and of the sum/mean roots. The facility itself is the
// header autograd/fuse.h.
#include "autograd/case_util.h"
#include "autograd/fuse.h"

namespace graft {

using namespace cases;

void register_fused_ops(std::vector<OpInfo>& t) {
  // On other devices a fused node runs on host copies (autograd/fuse.h): it needs copies only.
  auto host_loops = [](const Backend& b) { return b.copy != nullptr; };
  t.push_back({"fused", true, host_loops, [](Generator& g) {
                 ct::Var<0> x;
                 ct::Var<1> y;
                 auto lstm_like = fuse(sigmoid(x) * tanh(y) + gelu(x * y) - pow(x, 2.0) / (y * y + 1.0), "fused");
                 auto total = fuse(ct::sum(exp(x) * y), "fused_sum");
                 auto avg = fuse(ct::mean(log(x) + maximum(x, y)), "fused_mean");
                 auto cs = std::vector<OpCase>{
                     mk("sigmoid(x) tanh(y) + gelu(xy) - x^2/(y^2+1), [3,4] with [4]",
                        {u(g, {3, 4}), u(g, {4})},
                        [lstm_like](const auto& in) { return lstm_like(in[0], in[1]); }, false),
                     mk("sum(exp(x) y), transposed x", {u(g, {4, 3}), u(g, {3, 4})},
                        [total](const auto& in) { return total(in[0].t(), in[1]); }, false),
                     mk("mean(log x + max(x, y))", {u(g, {2, 5}, 0.5, 2), u(g, {2, 5}, -0.3, 0.3)},
                        [avg](const auto& in) { return avg(in[0], in[1]); }, false)};
                 return cs;
               }});
}

}  // namespace graft

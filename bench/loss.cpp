// The training loss of a label-smoothed sequence model and the NLL it reports (the Bible
// Transformer: label smoothing 0.1, the plain NLL for perplexity), over logits [N, V] with
// N = 4096 target tokens and V = 16000 (a --max-tokens 4096 batch, the recipe's vocabulary),
// forward + backward, against the two passes Transformer::loss made before
// cross_entropy_with_nll: the smoothed cross_entropy, then a second, plain one under NoGrad.
// Prints one JSON object per thread count:
//   {"name": "loss_smoothed_ce_with_nll_4096x16000", "value": ms, "unit": "ms/step",
//    "reference": ms of the two passes, "ratio": reference / value, "threads": n,
//    "nll_abs_diff": |nll - plain cross_entropy|}
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "ops/random.h"
#include "bench/timing.h"

using namespace graft;

int main(int argc, char** argv) {
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 4096, V = argc > 2 ? std::atoll(argv[2]) : 16000;
  Generator gen(1);
  Tensor logits = uniform({N, V}, -4, 4, TensorOptions(DType::f32).requires_grad(), &gen);
  std::vector<int64_t> tv(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) tv[size_t(n)] = (n * 7919) % V;
  for (int64_t n = 0; n < N; n += 10) tv[size_t(n)] = 0;  // [PAD] targets, ignored
  const Tensor target = from_vector(tv, {N});
  const CrossEntropyOptions smoothed{.ignore_index = 0, .label_smoothing = 0.1};
  CrossEntropyOptions plain = smoothed;
  plain.label_smoothing = 0.0;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    double nll_two = 0, nll_one = 0;
    auto two_passes = [&] {
      Tensor loss = cross_entropy(logits, target, smoothed);
      {
        NoGradGuard ng;
        nll_two = cross_entropy(logits.detach(), target, plain).item<double>();
      }
      loss.backward();
      logits.set_grad(Tensor());
    };
    auto one_pass = [&] {
      auto [loss, nll] = cross_entropy_with_nll(logits, target, smoothed);
      nll_one = nll;
      loss.backward();
      logits.set_grad(Tensor());
    };
    std::vector<double> t_two, t_one;
    two_passes(), one_pass();  // warm-up
    for (int r = 0; r < 9; ++r) {  // alternate, so that both see the same machine
      t_two.push_back(bench::seconds_of(two_passes));
      t_one.push_back(bench::seconds_of(one_pass));
    }
    const double a = bench::median(t_two) * 1e3, b = bench::median(t_one) * 1e3;
    std::printf("{\"name\": \"loss_smoothed_ce_with_nll_%ldx%ld\", \"value\": %.2f, \"unit\": \"ms/step\", "
                "\"reference\": %.2f, \"reference_source\": \"smoothed cross_entropy + a plain one under "
                "NoGrad\", \"ratio\": %.2f, \"threads\": %d, \"nll_abs_diff\": %.1e}\n",
                long(N), long(V), b, a, a / b, threads, std::abs(nll_one - nll_two));
  }
  return 0;
}

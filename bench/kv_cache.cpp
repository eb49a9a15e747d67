// Incremental decoding of the encoder-decoder Transformer (d_model 256, 4 heads, 3 + 3 layers,
// FFN 1024, vocab 8000: the benchmark model, untrained) with and without the KV cache.
// For each output length N it decodes N tokens (batch 1, source length 32, the arg-max fed back,
// no early stop) and prints one JSON object per line:
//   {"name": "kv_cache_decode", "cache": true|false, "length": N, "ms_per_token": total / N,
//    "last_tokens_ms": mean time of the last 8 steps, "threads": n}
// With the cache a step costs O(1) projections/FFN plus O(t) attention, so ms/token stays
// nearly flat; without it step t recomputes the whole prefix: O(t) projections/FFN and O(t^2)
// attention, so ms/token grows with N.
// Then batched greedy and beam-4 search over 16 sources ({"name": "translate", "beam", ...,
// "sentences_per_s"}).
// Usage: bench_kv_cache [--quick]   (--quick: N = 16, 32, 64; 24 output tokens)
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/threads.h"
#include "autograd/grad_mode.h"
#include "models/transformer.h"

using namespace graft;

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  manual_seed(1);
  models::Transformer model({.src_vocab = 8000, .tgt_vocab = 8000, .d_model = 256, .nhead = 4,
                             .num_encoder_layers = 3, .num_decoder_layers = 3,
                             .dim_feedforward = 1024, .dropout = 0.1, .share_embeddings = true,
                             .max_len = 512});
  model.eval();
  NoGradGuard ng;
  std::vector<int64_t> src_ids;
  for (int64_t i = 0; i < 32; ++i) src_ids.push_back(4 + (i * 37) % 7990);
  Tensor src = from_vector(src_ids, {1, 32});
  Tensor lengths = from_vector(std::vector<int64_t>{32}, {1});
  std::vector<int64_t> lens = quick ? std::vector<int64_t>{16, 32, 64}
                                    : std::vector<int64_t>{32, 64, 128, 256};
  for (bool cache : {true, false}) {
    for (int64_t N : lens) {
      auto dec = model.decoder(src, lengths, cache);
      Tensor prev = from_vector(std::vector<int64_t>{1}, {1});  // <bos>
      std::vector<double> ms;
      for (int64_t t = 0; t < N; ++t) {
        auto t0 = std::chrono::steady_clock::now();
        Tensor logp = dec->step(prev);
        prev = argmax(logp, -1);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      double total = 0, last = 0;
      for (double x : ms) total += x;
      for (int64_t t = N - 8; t < N; ++t) last += ms[size_t(t)] / 8.0;
      std::printf(
          "{\"name\": \"kv_cache_decode\", \"cache\": %s, \"length\": %ld, \"ms_per_token\": %.3f, "
          "\"last_tokens_ms\": %.3f, \"threads\": %d}\n",
          cache ? "true" : "false", long(N), total / double(N), last, graft::requested_threads());
      std::fflush(stdout);
    }
  }
  // Batched search through Transformer::translate: 16 sources of 8..38 tokens, 48 output tokens
  // each (the untrained model rarely says <eos>, so the steps are those of a long sentence).
  std::vector<std::vector<int64_t>> srcs;
  for (int64_t b = 0; b < 16; ++b) {
    std::vector<int64_t> s;
    for (int64_t i = 0; i < 8 + 2 * b; ++i) s.push_back(4 + (i * 37 + b * 11) % 7990);
    srcs.push_back(s);
  }
  for (int64_t beam : {1, 4}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto hyps = model.translate(srcs, {.beam = beam, .max_len = quick ? 24 : 48});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int64_t tokens = 0;
    for (const auto& h : hyps) tokens += int64_t(h.tokens.size());
    std::printf("{\"name\": \"translate\", \"beam\": %ld, \"sentences\": 16, \"output_tokens\": %ld, "
                "\"seconds\": %.3f, \"sentences_per_s\": %.2f, \"threads\": %d}\n",
                long(beam), long(tokens), s, 16.0 / s, graft::requested_threads());
    std::fflush(stdout);
  }
  return 0;
}

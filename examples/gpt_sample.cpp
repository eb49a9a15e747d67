// A tiny GPT (models/gpt.h): a character-level causal language model trained on a short text
// built into this file, then sampled from with the KV cache (nn/kv_cache.h): each new token
// runs the model on ONE position and attends to the cached keys and values of the earlier ones.
//
//   build/examples/gpt_sample [--steps N] [--quick]
//
// Default 400 steps (--quick: 150) of 8 random 128-character windows. Prints the loss, a greedy
// continuation and two sampled ones (temperature, top-k), and the time per token with and
// without the cache. Exits 1 if greedy decoding with the cache differs from decoding without
// it (recomputing the whole context every token), or the final loss is above 1.5 nats per
// character (--quick: 2.4; a uniform guess is log(V) = 3.3).
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "graft.h"
#include "models/gpt.h"
#include "example_main.h"

using namespace graft;

const char* kText =
    "the tape remembers every step. when the loss is known, the tape is read backwards, and "
    "each node hands its gradient to the nodes that made it. a leaf keeps what it is given and "
    "adds it to what it had. then the optimizer takes a small step downhill, the tape is thrown "
    "away, and the next batch begins. the model does not know the words; it only learns which "
    "letter tends to follow which, and then which word tends to follow which. given enough steps "
    "it remembers the whole text, and when it is asked to go on, it goes on with the text it "
    "has seen. the tape remembers every step, and the model remembers the tape. ";

// One token per character: id = position in the sorted set of characters.
struct Chars {
  std::string alphabet;
  std::map<char, int64_t> id;
  explicit Chars(const std::string& text) {
    for (char ch : text) id[ch] = 0;
    for (auto& [ch, i] : id) i = int64_t(alphabet.size()), alphabet += ch;
  }
  std::vector<int64_t> encode(const std::string& s) const {
    std::vector<int64_t> out;
    for (char ch : s) out.push_back(id.at(ch));
    return out;
  }
  std::string decode(const std::vector<int64_t>& ids) const {
    std::string s;
    for (int64_t i : ids) s += alphabet[size_t(i)];
    return s;
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(int argc, char** argv) {
  const int64_t steps = parse_steps(argc, argv, 400, 150, "gpt_sample [--steps N] [--quick]");
  const std::string text = kText;
  const Chars chars(text);
  const std::vector<int64_t> data = chars.encode(text);
  const int64_t B = 8, T = 128, V = int64_t(chars.alphabet.size());

  manual_seed(0);
  models::GPT lm({.vocab = V, .d_model = 64, .nhead = 4, .num_layers = 2, .dropout = 0.0,
                  .max_len = 256});
  optim::AdamW opt(lm.parameters(), {.lr = 3e-3, .weight_decay = 0.01});
  optim::CosineWithWarmup sched(opt, steps / 20, steps);
  fmt::print("{} characters of text, vocabulary {}; GPT d_model 64, 4 heads, 2 layers, {} "
             "parameters\n", text.size(), V, lm.num_parameters());

  Generator gen(1);
  double loss_value = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    // B windows of T + 1 characters: the model predicts characters 1..T from 0..T-1
    std::vector<int64_t> starts = randint(0, int64_t(data.size()) - T - 1, {B}, &gen).to_vector<int64_t>();
    std::vector<int64_t> batch;
    for (int64_t s : starts) batch.insert(batch.end(), data.begin() + s, data.begin() + s + T + 1);
    Tensor loss = lm.loss(from_vector(batch, {B, T + 1}));  // ids [B, T+1] -> scalar
    opt.zero_grad();
    loss.backward();
    nn::clip_grad_norm_(lm.parameters(), 1.0);
    opt.step();
    sched.step();
    loss_value = loss.item();
    if (step % (steps / 4) == 0 || step == 1)
      fmt::print("step {:4d}  loss {:.3f} nats/char\n", step, loss_value);
  }

  const std::string prompt = "the tape ";
  const int64_t n = 110;  // prompt + n stay inside the T positions trained
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int64_t> cached = lm.generate(chars.encode(prompt), n, {.temperature = 0});
  double t_cache = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  std::vector<int64_t> recomputed = lm.generate(chars.encode(prompt), n, {.temperature = 0}, false);
  double t_full = seconds_since(t0);
  fmt::print("\ngreedy:        \"{}{}\"\n", prompt, chars.decode(cached));
  for (uint64_t seed : {1, 2})
    fmt::print("T=0.8, top-10: \"{}{}\"\n", prompt,
               chars.decode(lm.generate(chars.encode(prompt), 80,
                                        {.temperature = 0.8, .top_k = 10, .seed = seed})));
  const bool same = cached == recomputed;
  fmt::print("\nper token: {:.2f} ms with the KV cache, {:.2f} ms recomputing the context; "
             "same tokens: {}\n", 1e3 * t_cache / n, 1e3 * t_full / n, same ? "yes" : "NO");
  const double need = steps >= 400 ? 1.5 : 2.4;
  fmt::print("final loss {:.3f} (need <= {})\n", loss_value, need);
  return same && loss_value <= need ? 0 : 1;
}

int main(int argc, char** argv) {
  return run_example("gpt_sample", [&] { return run(argc, argv); });
}

// An LSTM encoder and a Bahdanau-attention LSTM decoder (Bahdanau et al. 2015), written out
// from nn/ parts, learning to reverse digit strings ("40213" -> "31204"). Every batch is freshly
// drawn (data/seq2seq_tasks.h); training is teacher-forced; decoding is greedy.
//
//   build/examples/seq2seq_attention [--steps N] [--quick]
//
// Default 400 steps (--quick: 200) of 64 strings. Prints the loss, the held-out exact match, a
// few greedy translations and, for the first one, where the decoder looked at each step. Exits 1
// below 95% exact match (80% with fewer steps). models/seq2seq.h is the full version.
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "data/seq2seq_tasks.h"
#include "data/tokenizer.h"
#include "graft.h"
#include "example_main.h"

using namespace graft;

// B batch, S source length, T target length, E embedding width, H hidden width, V vocabulary.
struct AttnSeq2Seq : nn::Module {
  std::shared_ptr<nn::Embedding> src_emb, tgt_emb;
  std::shared_ptr<nn::LSTM> encoder;
  std::shared_ptr<nn::LSTMCell> decoder;
  std::shared_ptr<nn::BahdanauAttention> attn;
  std::shared_ptr<nn::Linear> out;
  struct State {
    nn::RnnState dec;            // decoder h, c [B, H]
    Tensor keys, key_padding_mask, weights;  // [B, S, H] encoder outputs; bool [B, S] true = padding; [B, S]
  };

  AttnSeq2Seq(int64_t V, int64_t E, int64_t H) {
    src_emb = register_module("src_emb", std::make_shared<nn::Embedding>(V, E));
    tgt_emb = register_module("tgt_emb", std::make_shared<nn::Embedding>(V, E));
    encoder = register_module("encoder", std::make_shared<nn::LSTM>(E, H));
    decoder = register_module("decoder", std::make_shared<nn::LSTMCell>(E + H, H));
    attn = register_module("attn", std::make_shared<nn::BahdanauAttention>(H, H, H));
    out = register_module("out", std::make_shared<nn::Linear>(2 * H, V));
  }
  // The decoder starts from the encoder's final state (layer 0: .select(0, 0) of [1, B, H]).
  State encode(const data::Seq2SeqBatch& b) {
    nn::RnnOutput r = encoder->forward(src_emb->forward(b.src), b.src_lengths);  // [B, S, H]
    attn->precompute(r.output);  // U h_s once per batch, not once per decoder step
    return {{r.state.h.select(0, 0), r.state.c.select(0, 0)}, r.output, b.src_key_padding_mask, {}};
  }
  // One decoder step: c_t = attend(h_{t-1}, keys); h_t = LSTM([emb(y_{t-1}); c_t]);
  // logits = W [h_t; c_t]. prev int64 [B] -> logits [B, V].
  Tensor step(const Tensor& prev, State& s) {
    nn::AttentionOutput a = attn->attend(s.dec.h, s.keys, s.key_padding_mask, 0);  // context [B, H]
    s.weights = a.weights;
    s.dec = decoder->forward(cat({tgt_emb->forward(prev), a.context}, 1), s.dec);
    return out->forward(cat({s.dec.h, a.context}, 1));
  }
};

// Teacher forcing: the decoder reads the true previous token tgt_in[:, t] at every step.
Tensor loss_of(AttnSeq2Seq& m, const data::Seq2SeqBatch& b) {
  AttnSeq2Seq::State s = m.encode(b);
  std::vector<Tensor> logits;
  for (int64_t t = 0; t < b.tgt_in.size(1); ++t) logits.push_back(m.step(b.tgt_in.select(1, t), s));
  // [B, T, V] against tgt_out [B, T]; <pad> positions do not count
  return cross_entropy(stack(logits, 1), b.tgt_out, {.ignore_index = data::kPad});
}

// Greedy decoding: feed back the arg-max token until <eos> (or S + 2 steps). weights (out):
// the first row's attention, one [S] vector per output token.
std::vector<std::string> greedy(AttnSeq2Seq& m, const data::CharTokenizer& tok,
                                const std::vector<std::string>& srcs,
                                std::vector<std::vector<float>>* weights = nullptr) {
  NoGradGuard no_grad;
  m.eval();
  std::vector<std::vector<int64_t>> ids, outs(srcs.size());
  for (const std::string& s : srcs) ids.push_back(tok.encode(s));
  data::Seq2SeqBatch b = data::make_seq2seq_batch(ids);
  AttnSeq2Seq::State st = m.encode(b);
  Tensor prev = full({b.size()}, double(data::kBos), DType::i64);
  for (int64_t t = 0; t < b.src.size(1) + 2; ++t) {
    prev = argmax(m.step(prev, st), 1);  // [B]
    std::vector<int64_t> p = prev.to_vector<int64_t>();
    for (size_t i = 0; i < p.size(); ++i) outs[i].push_back(p[i]);
    if (weights) weights->push_back(st.weights.select(0, 0).to_vector<float>());
  }
  m.train();
  std::vector<std::string> texts;
  for (const auto& o : outs) texts.push_back(tok.decode(o));  // stops at the first <eos>
  return texts;
}

int run(int argc, char** argv) {
  const int64_t steps = parse_steps(argc, argv, 400, 200, "seq2seq_attention [--steps N] [--quick]");
  const data::TaskOptions task{.min_len = 3, .max_len = 12, .num_symbols = 10};
  Generator data_gen(1), test_gen(2);  // training batches; the held-out set
  const data::CharTokenizer tok = data::CharTokenizer::fit({"0123456789"});  // 4 specials + 10
  const std::vector<data::Example> test = data::make_task("reverse", 500, task, test_gen);
  manual_seed(0);
  AttnSeq2Seq model(tok.vocab().size(), /*E=*/32, /*H=*/64);
  optim::Adam opt(model.parameters(), {.lr = 5e-3});
  fmt::print("reverse digit strings of length {}..{}: LSTM + Bahdanau attention, {} parameters\n",
             task.min_len, task.max_len, model.num_parameters());
  auto exact_match = [&] {  // greedy decoding of the held-out strings
    std::vector<std::string> srcs, hyp;
    for (const auto& e : test) srcs.push_back(e.source);
    hyp = greedy(model, tok, srcs);
    int ok = 0;
    for (size_t i = 0; i < test.size(); ++i) ok += hyp[i] == test[i].target;
    return double(ok) / double(test.size());
  };
  for (int64_t step = 1; step <= steps; ++step) {
    std::vector<std::vector<int64_t>> src, tgt;
    for (const auto& e : data::make_task("reverse", 64, task, data_gen)) {
      src.push_back(tok.encode(e.source));
      tgt.push_back(tok.encode(e.target));
    }
    Tensor loss = loss_of(model, data::make_seq2seq_batch(src, tgt));
    opt.zero_grad();
    loss.backward();
    nn::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    if (step % (steps / 4) == 0)
      fmt::print("step {:4d}  loss {:.4f}  held-out exact match {:.1f}%\n", step, loss.item(), 100 * exact_match());
  }
  std::vector<std::vector<float>> w;  // the attention of demo[0], one [S] row per output step
  std::vector<std::string> demo = {"0123456789", "31337", "9081726354"}, hyp = greedy(model, tok, demo, &w);
  for (size_t i = 0; i < demo.size(); ++i) fmt::print("  {:>12} -> {}\n", demo[i], hyp[i]);
  fmt::print("attention of \"{}\": output step t looks at source position\n ", demo[0]);
  for (size_t t = 0, best = 0; t < hyp[0].size(); ++t, best = 0) {
    for (size_t s = 1; s < demo[0].size(); ++s) best = w[t][s] > w[t][best] ? s : best;
    fmt::print(" {}->{} ({:.2f})", t, best, w[t][best]);
  }
  const double em = exact_match(), need = steps >= 400 ? 0.95 : 0.8;
  fmt::print("\nheld-out exact match {:.1f}% (need {:.0f}%)\n", 100 * em, 100 * need);
  return em >= need ? 0 : 1;
}

int main(int argc, char** argv) {
  return run_example("seq2seq_attention", [&] { return run(argc, argv); });
}

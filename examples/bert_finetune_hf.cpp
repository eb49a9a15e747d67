// Fine-tuning BERT from a Hugging Face checkpoint directory: load config.json +
// model.safetensors (models/bert_hf.h) and vocab.txt (data/wordpiece.h), put a sequence
// classifier on the encoder (models/bert_heads.h) and fine-tune it on a toy task: does the
// sentence mention an animal ("fox" or "dog")?
//
//   build/examples/bert_finetune_hf DIR [--steps N] [--quick]
//   build/examples/bert_finetune_hf tests/fixtures/bert_hf --quick
//
// DIR is what transformers' save_pretrained writes (BertForPreTraining or BertModel weights, in
// safetensors) plus the tokenizer's vocab.txt. tests/fixtures/bert_hf is a tiny random-weight
// one (hidden 32, 2 layers, 166 tokens), so here "pre-trained" means only "loaded"; a real
// checkpoint works the same way, e.g. one saved in Python with
//   BertForPreTraining.from_pretrained("google/bert_uncased_L-2_H-128_A-2").save_pretrained(DIR)
//   BertTokenizer.from_pretrained(...).save_pretrained(DIR)
// (its words must then be in that vocabulary: they are ordinary English). Default 150 steps
// (--quick: 60). Exits 1 if the loaded encoder differs from the checkpoint's or the held-out
// accuracy is below 95% (--quick: 80%).
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/batching.h"
#include "data/wordpiece.h"
#include "graft.h"
#include "models/bert_heads.h"
#include "models/bert_hf.h"
#include "example_main.h"

using namespace graft;

struct Example {
  std::string text;
  int64_t label;  // 1: mentions an animal
};

// Sentences of 3..8 words; half of them (label 1) contain "fox" or "dog" at a random place.
std::vector<Example> make_examples(int n, Generator& gen) {
  const std::vector<std::string> words = {"the", "quick", "brown", "jumps", "over", "lazy",
                                          "hello", "world", "running", "cafe", "is", "a", "test",
                                          "sentence", "another", "one", "long", "unwanted"};
  auto draw = [&](int64_t k) { return randint(0, k, {1}, &gen).item<int64_t>(); };
  std::vector<Example> out;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> s;
    for (int64_t w = 0, len = 3 + draw(6); w < len; ++w) s.push_back(words[size_t(draw(int64_t(words.size())))]);
    int64_t label = draw(2);
    if (label) s.insert(s.begin() + draw(int64_t(s.size()) + 1), draw(2) ? "fox" : "dog");
    out.push_back({fmt::format("{}", fmt::join(s, " ")), label});
  }
  return out;
}

// [CLS] text [SEP] for each example, padded with [PAD]: ids, token types int64 [B, T].
std::pair<Tensor, Tensor> encode(const data::WordPieceTokenizer& tok, const std::vector<Example>& ex) {
  std::vector<std::vector<int64_t>> ids;
  for (const Example& e : ex) ids.push_back(tok.encode(e.text, /*add_special_tokens=*/true));
  Tensor x = data::pad_sequences(ids, tok.pad_id());
  return {x, zeros_like(x)};  // one sentence: token type 0 everywhere
}

Tensor labels_of(const std::vector<Example>& ex) {
  std::vector<int64_t> y;
  for (const Example& e : ex) y.push_back(e.label);
  return from_vector(y, {int64_t(y.size())});  // [B]
}

double accuracy(models::BertForSequenceClassification& m, const data::WordPieceTokenizer& tok,
                const std::vector<Example>& ex) {
  NoGradGuard no_grad;
  m.eval();
  auto [ids, types] = encode(tok, ex);
  double acc = mean(eq(argmax(m.forward(ids, types), 1), labels_of(ex)).to(DType::f32)).item();
  m.train();
  return acc;
}

int run(int argc, char** argv) {
  std::string dir;
  const int64_t steps = parse_steps(argc, argv, 150, 60, "", [&](int& i) {
    if (!dir.empty() || argv[i][0] == '-') return false;
    dir = argv[i];
    return true;
  });
  GRAFT_CHECK(!dir.empty(), "usage: bert_finetune_hf DIR [--steps N] [--quick]; DIR: a Hugging "
              "Face BERT checkpoint directory, e.g. tests/fixtures/bert_hf");

  std::unique_ptr<models::BertForPreTraining> pre = models::load_hf_bert(dir);
  auto tok = data::WordPieceTokenizer::load(dir + "/vocab.txt");
  const models::BertConfig& c = pre->config;
  fmt::print("{}: BERT hidden {}, {} layers, {} heads, vocabulary {}\n", dir, c.hidden_size,
             c.num_layers, c.num_heads, c.vocab_size);
  fmt::print("WordPiece: {}\n", tok.tokenize("The quick brown fox jumps over the lazy dog"));

  manual_seed(0);  // the classifier's new weights (the encoder's come from the checkpoint)
  models::BertForSequenceClassification model(c, /*num_labels=*/2);
  model.load_pretrained(pre->state_dict());
  Generator gen(3);
  std::vector<Example> train = make_examples(2000, gen), test = make_examples(300, gen);
  auto [ids, types] = encode(tok, {test.begin(), test.begin() + 4});
  double diff;
  {  // the classifier's encoder must compute what the checkpoint's does
    NoGradGuard no_grad;
    pre->eval();
    model.eval();
    diff = amax(abs(model.body->encode(ids, types) - pre->encode(ids, types))).item();
    model.train();
  }
  fmt::print("encoder outputs, classifier vs checkpoint: max |diff| = {:g}\n", diff);
  fmt::print("accuracy before fine-tuning: {:.1f}%\n", 100 * accuracy(model, tok, test));

  optim::AdamW opt(model.parameters(), {.lr = 2e-3, .weight_decay = 0.01});
  optim::LinearWarmupDecay sched(opt, steps / 10, steps);  // BERT's schedule
  const int64_t batch = 32;
  for (int64_t step = 0; step < steps; ++step) {
    size_t at = size_t(step * batch) % (train.size() - batch);
    std::vector<Example> b(train.begin() + at, train.begin() + at + batch);
    auto [x, t] = encode(tok, b);             // [B, T]
    Tensor logits = model.forward(x, t);      // [B, 2]
    Tensor loss = model.loss(logits, labels_of(b));
    opt.zero_grad();
    loss.backward();
    opt.step();
    sched.step();
    if ((step + 1) % (steps / 3) == 0)
      fmt::print("step {:4d}  loss {:.4f}  held-out accuracy {:.1f}%\n", step + 1, loss.item(),
                 100 * accuracy(model, tok, test));
  }

  const double acc = accuracy(model, tok, test), need = steps >= 150 ? 0.95 : 0.8;
  {
    NoGradGuard no_grad;
    model.eval();
    for (std::string s : {"the quick brown fox", "hello world", "a lazy dog is running"}) {
      auto [x, t] = encode(tok, {{s, 0}});
      Tensor p = softmax(model.forward(x, t), 1);  // [1, 2]
      fmt::print("  P(animal | \"{}\") = {:.3f}\n", s, p.to_vector<double>()[1]);
    }
  }
  fmt::print("held-out accuracy {:.1f}% (need {:.0f}%)\n", 100 * acc, 100 * need);
  return diff == 0 && acc >= need ? 0 : 1;
}

int main(int argc, char** argv) {
  return run_example("bert_finetune_hf", [&] { return run(argc, argv); });
}

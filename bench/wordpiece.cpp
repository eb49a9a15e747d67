// WordPiece tokenizer throughput: trains a vocabulary on the first MiB of a text, then times
// encode() over the whole text (line by line, as pretraining data preparation does).
// One JSON object per line:
//   {"name": "wordpiece_train", "vocab": V, "train_mib": x, "s": seconds}
//   {"name": "wordpiece_encode", "mib": size, "tokens": n, "s": seconds, "mib_per_s": rate}
// Usage: bench_wordpiece [text file] [--vocab vocab.txt] [--save trained_vocab.txt] [--repeat N]
//   default text: /usr/share/common-licenses/* concatenated, repeated to >= 16 MiB.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/wordpiece.h"

using namespace graft;
namespace fs = std::filesystem;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, vocab_path, save_path;
  int repeat = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--vocab" && i + 1 < argc) vocab_path = argv[++i];
    else if (a == "--save" && i + 1 < argc) save_path = argv[++i];
    else if (a == "--repeat" && i + 1 < argc) repeat = std::stoi(argv[++i]);
    else path = a;
  }
  std::string text;
  if (!path.empty()) {
    text = read_all(path);
  } else {
    std::string base;
    for (const auto& e : fs::directory_iterator("/usr/share/common-licenses"))
      if (e.is_regular_file()) base += read_all(e.path().string());
    while (!base.empty() && text.size() < (size_t(16) << 20)) text += base;
  }
  std::string once = text;
  for (int r = 1; r < repeat; ++r) text += once;
  std::vector<std::string> lines = lines_of(text);
  double t0 = now_s();
  data::WordPieceTokenizer tok = [&] {
    if (!vocab_path.empty()) return data::WordPieceTokenizer::load(vocab_path);
    std::vector<std::string> head = lines_of(text.substr(0, std::min(text.size(), size_t(1) << 20)));
    return data::WordPieceTokenizer::train(head, 8000);
  }();
  double t1 = now_s();
  if (!save_path.empty()) tok.save(save_path);
  std::printf("{\"name\": \"wordpiece_train\", \"vocab\": %lld, \"train_mib\": %.2f, \"s\": %.3f, "
              "\"loaded\": %s}\n", (long long)tok.size(),
              vocab_path.empty() ? std::min(double(text.size()), double(1 << 20)) / (1 << 20) : 0.0,
              t1 - t0, vocab_path.empty() ? "false" : "true");
  int64_t n = 0;
  double t2 = now_s();
  for (const std::string& l : lines) n += int64_t(tok.encode(l).size());
  double t3 = now_s(), mib = double(text.size()) / (1 << 20);
  std::printf("{\"name\": \"wordpiece_encode\", \"mib\": %.2f, \"tokens\": %lld, \"s\": %.3f, "
              "\"mib_per_s\": %.2f}\n", mib, (long long)n, t3 - t2, mib / (t3 - t2));
  return 0;
}

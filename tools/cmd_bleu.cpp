// `graft bleu HYPOTHESES REFERENCES`: corpus BLEU of a file of translations, one per line,
// with the same code as `train transformer`'s test figures (data::corpus_bleu: sacreBLEU's 13a
// tokenisation and defaults), so that another system's output (a PyTorch reference trainer's)
// is scored exactly as graft's own.
//
//   graft bleu runs/tf/test_greedy.txt datasets/bible-en-es/test.tsv
//   graft bleu torch_hyp.txt refs.txt
//
// REFERENCES is a text file (one reference per line) or, when it ends in .tsv, a parallel
// corpus whose targets are the references (data::read_parallel_tsv). The first N references
// are used, N = the hypotheses' line count (a run's test file holds its first --test-size
// pairs); fewer references than hypotheses is an error. Prints one JSON line: the hypotheses'
// count, BLEU against the references as given, against lowercased ones (the hypotheses as they
// are: the figure for a model whose output is lowercase), case-insensitive BLEU (both sides
// lowercased, sacreBLEU's --lowercase), the n-gram precisions, the brevity penalty and the lengths.
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/bleu.h"
#include "data/parallel_corpus.h"
#include "ops/error.h"
#include "ops/file_io.h"
#include "tools/commands.h"

namespace graft::tools {

namespace {

struct BleuArgs {
  std::string hypotheses, references;
};

// The file's lines without their line ends ("\r\n" too); a last line without '\n' counts.
std::vector<std::string> read_lines(const std::string& path) {
  const std::string text = read_file(path, "bleu");
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

nlohmann::ordered_json score_json(const data::BleuScore& s) {
  nlohmann::ordered_json j;
  j["bleu"] = s.score;
  j["precisions"] = s.precisions;
  j["brevity_penalty"] = s.brevity_penalty;
  j["sys_len"] = s.sys_len;
  j["ref_len"] = s.ref_len;
  return j;
}

int run_bleu(const BleuArgs& a) {
  const std::vector<std::string> hyps = read_lines(a.hypotheses);
  GRAFT_CHECK(!hyps.empty(), "bleu: {} holds no hypotheses", a.hypotheses);
  std::vector<std::string> refs;
  if (ends_with(a.references, ".tsv")) {
    for (const data::Example& e : data::read_parallel_tsv(a.references, int64_t(hyps.size())))
      refs.push_back(e.target);
  } else {
    refs = read_lines(a.references);
  }
  GRAFT_CHECK(refs.size() >= hyps.size(), "bleu: {} has {} hypotheses but {} has only {} references",
              a.hypotheses, hyps.size(), a.references, refs.size());
  std::vector<std::vector<std::string>> plain, lower;
  for (size_t i = 0; i < hyps.size(); ++i) {
    plain.push_back({refs[i]});
    lower.push_back({data::lowercase(refs[i])});
  }
  nlohmann::ordered_json out;
  out["hypotheses"] = hyps.size();
  const data::BleuScore s = data::corpus_bleu(hyps, plain);
  out["bleu"] = s.score;
  out["bleu_lowercased_references"] = data::corpus_bleu(hyps, lower).score;
  out["bleu_case_insensitive"] = data::corpus_bleu_lowercase(hyps, plain).score;
  out["detail"] = score_json(s);
  fmt::print("{}\n", out.dump());
  return 0;
}

}  // namespace

void register_bleu_commands(CLI::App& app, CLI::App& train, Commands& cmds) {
  (void)train;
  auto a = std::make_shared<BleuArgs>();
  CLI::App* c = app.add_subcommand(
      "bleu", "Corpus BLEU (sacreBLEU 13a) of a translation file, one hypothesis per line, "
              "against references (text, or a .tsv corpus's targets); one JSON line out");
  c->add_option("hypotheses", a->hypotheses, "Translations, one per line")->required();
  c->add_option("references", a->references, "References: one per line, or a .tsv corpus (its "
                "first N targets, N = the hypotheses' count)")->required();
  cmds.push_back({c, [a] { return run_bleu(*a); }});
}

}  // namespace graft::tools

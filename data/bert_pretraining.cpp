// BERT pretraining data: document/sentence splitting, sentence pairs with next-sentence labels
// and 80/10/10 masked-LM corruption (see bert_pretraining.h).
#include "data/bert_pretraining.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "data/text_io.h"
#include "ops/error.h"

namespace graft::data {
namespace {

double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }
// Uniform in [lo, hi]; the modulo bias is below 2^-40 for the sizes used here.
int64_t randint(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return lo + int64_t(rng() % uint64_t(hi - lo + 1));
}

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

void append(std::vector<int64_t>& out, const std::vector<int64_t>& s) {
  out.insert(out.end(), s.begin(), s.end());
}

}  // namespace

void truncate_pair(std::vector<int64_t>& a, std::vector<int64_t>& b, size_t max_tokens,
                   std::mt19937_64& rng) {
  // The kept parts are a[a0, a1) and b[b0, b1): each step moves one end inward, and the cut
  // happens once at the end, so the work is O(|A| + |B|) however much is removed (erasing at
  // the front token by token would be quadratic: hours for a 2M-token line).
  size_t a0 = 0, a1 = a.size(), b0 = 0, b1 = b.size();
  while ((a1 - a0) + (b1 - b0) > max_tokens) {
    const bool from_a = a1 - a0 > b1 - b0;  // the longer side, B on ties
    size_t& front = from_a ? a0 : b0;
    size_t& back = from_a ? a1 : b1;
    if (uniform01(rng) < 0.5) ++front;
    else --back;
  }
  a.erase(a.begin() + std::ptrdiff_t(a1), a.end());
  a.erase(a.begin(), a.begin() + std::ptrdiff_t(a0));
  b.erase(b.begin() + std::ptrdiff_t(b1), b.end());
  b.erase(b.begin(), b.begin() + std::ptrdiff_t(b0));
}

std::vector<std::string> split_documents(const std::string& text) {
  std::vector<std::string> docs;
  std::istringstream in(text);
  std::string line, cur;
  while (std::getline(in, line)) {
    strip_cr(line);  // CRLF text
    if (blank(line)) {
      if (!cur.empty()) docs.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += line;
      cur += '\n';
    }
  }
  if (!cur.empty()) docs.push_back(std::move(cur));
  return docs;
}

std::vector<std::string> split_sentences(const std::string& document) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    std::string t = trim(cur);
    if (!t.empty()) out.push_back(std::move(t));
    cur.clear();
  };
  for (size_t i = 0; i < document.size(); ++i) {
    char c = document[i];
    if (c == '\n' || c == '\r') { flush(); continue; }
    cur.push_back(c);
    if (c == '.' || c == '!' || c == '?') {
      while (i + 1 < document.size() && std::string_view("\"')]").find(document[i + 1]) !=
                                            std::string_view::npos)
        cur.push_back(document[++i]);
      if (i + 1 >= document.size() || std::isspace(static_cast<unsigned char>(document[i + 1])))
        flush();
    }
  }
  flush();
  return out;
}

std::vector<TokenizedDocument> tokenize_documents(const std::vector<std::string>& documents,
                                                  const WordPieceTokenizer& tokenizer) {
  std::vector<TokenizedDocument> out;
  for (const std::string& d : documents) {
    TokenizedDocument doc;
    for (const std::string& s : split_sentences(d)) {
      std::vector<int64_t> ids = tokenizer.encode(s);
      if (!ids.empty()) doc.push_back(std::move(ids));
    }
    if (!doc.empty()) out.push_back(std::move(doc));
  }
  return out;
}

std::vector<int64_t> mask_tokens(std::vector<int64_t>& ids, const WordPieceTokenizer& tok,
                                 const BertPretrainingOptions& o, std::mt19937_64& rng) {
  GRAFT_CHECK(o.mask_prob >= 0 && o.mask_prob <= 1 && o.mask_token_prob >= 0 &&
              o.random_token_prob >= 0 && o.mask_token_prob + o.random_token_prob <= 1,
              "bert mask_tokens: bad probabilities mask_prob={} mask_token_prob={} "
              "random_token_prob={}; hint: each in [0, 1], the last two summing to <= 1",
              o.mask_prob, o.mask_token_prob, o.random_token_prob);
  GRAFT_CHECK(tok.size() > 5, "bert mask_tokens: the vocabulary has only {} tokens; hint: it "
              "needs ordinary tokens besides the five specials", tok.size());
  std::vector<int64_t> labels(ids.size(), kIgnoreIndex);
  std::vector<size_t> cand;
  for (size_t p = 0; p < ids.size(); ++p)
    if (ids[p] != tok.cls_id() && ids[p] != tok.sep_id() && ids[p] != tok.pad_id())
      cand.push_back(p);
  if (cand.empty()) return labels;
  size_t n = std::max<size_t>(1, size_t(std::llround(o.mask_prob * double(cand.size()))));
  if (o.mask_prob == 0) n = 0;
  if (o.max_predictions > 0) n = std::min(n, size_t(o.max_predictions));
  n = std::min(n, cand.size());
  for (size_t k = 0; k < n; ++k)  // partial Fisher-Yates: the first n are a uniform sample
    std::swap(cand[k], cand[size_t(randint(rng, int64_t(k), int64_t(cand.size()) - 1))]);
  std::sort(cand.begin(), cand.begin() + std::ptrdiff_t(n));
  for (size_t k = 0; k < n; ++k) {
    size_t p = cand[k];
    labels[p] = ids[p];
    double r = uniform01(rng);
    if (r < o.mask_token_prob) {
      ids[p] = tok.mask_id();
    } else if (r < o.mask_token_prob + o.random_token_prob) {
      int64_t t;
      do t = randint(rng, 0, tok.size() - 1);
      while (tok.is_special(t));
      ids[p] = t;
    }
  }
  return labels;
}

std::vector<BertExample> create_pretraining_examples(const std::vector<TokenizedDocument>& docs,
                                                     const WordPieceTokenizer& tok,
                                                     const BertPretrainingOptions& o) {
  GRAFT_CHECK(o.max_seq_len >= 5, "create_pretraining_examples: max_seq_len {} is too short; "
              "hint: [CLS] A [SEP] B [SEP] needs at least 5", o.max_seq_len);
  GRAFT_CHECK(o.dupe_factor >= 1, "create_pretraining_examples: dupe_factor {} must be >= 1",
              o.dupe_factor);
  std::mt19937_64 rng(o.seed);
  const int64_t max_tokens = o.max_seq_len - 3;
  std::vector<BertExample> out;
  for (int64_t pass = 0; pass < o.dupe_factor; ++pass) {
    for (size_t d = 0; d < docs.size(); ++d) {
      const TokenizedDocument& doc = docs[d];
      int64_t target = max_tokens;
      if (uniform01(rng) < o.short_seq_prob) target = randint(rng, 2, max_tokens);
      std::vector<size_t> chunk;  // sentence indices
      int64_t len = 0;
      for (size_t i = 0; i < doc.size(); ++i) {
        chunk.push_back(i);
        len += int64_t(doc[i].size());
        if (i + 1 != doc.size() && len < target) continue;
        size_t a_end = chunk.size() >= 2 ? size_t(randint(rng, 1, int64_t(chunk.size()) - 1)) : 1;
        std::vector<int64_t> a, b;
        for (size_t k = 0; k < a_end; ++k) append(a, doc[chunk[k]]);
        bool random_next = chunk.size() == 1 || uniform01(rng) >= o.next_sentence_prob;
        if (random_next && docs.size() < 2) random_next = false;
        if (random_next) {
          size_t r = d;
          for (int tries = 0; tries < 10 && r == d; ++tries)
            r = size_t(randint(rng, 0, int64_t(docs.size()) - 1));
          if (r == d) r = (d + 1) % docs.size();
          const TokenizedDocument& other = docs[r];
          int64_t target_b = std::max<int64_t>(1, target - int64_t(a.size()));
          for (size_t k = size_t(randint(rng, 0, int64_t(other.size()) - 1));
               k < other.size() && int64_t(b.size()) < target_b; ++k)
            append(b, other[k]);
          i -= chunk.size() - a_end;  // the unused sentences start the next chunk
        } else {
          for (size_t k = a_end; k < chunk.size(); ++k) append(b, doc[chunk[k]]);
        }
        chunk.clear();
        len = 0;
        truncate_pair(a, b, size_t(max_tokens), rng);
        if (a.empty() || b.empty()) continue;  // a one-sentence document with nothing to pair
        BertExample ex;
        ex.input_ids.push_back(tok.cls_id());
        append(ex.input_ids, a);
        ex.input_ids.push_back(tok.sep_id());
        ex.token_type_ids.assign(ex.input_ids.size(), 0);
        append(ex.input_ids, b);
        ex.input_ids.push_back(tok.sep_id());
        ex.token_type_ids.resize(ex.input_ids.size(), 1);
        ex.next_sentence_label = random_next ? 1 : 0;
        ex.labels = mask_tokens(ex.input_ids, tok, o, rng);
        out.push_back(std::move(ex));
      }
    }
  }
  for (size_t k = out.size(); k > 1; --k)  // shuffle
    std::swap(out[k - 1], out[size_t(randint(rng, 0, int64_t(k) - 1))]);
  return out;
}

}  // namespace graft::data

#include "data/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "ops/error.h"

namespace graft::data {

namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
// The class [\{-\~\[-\` -\&\(-\+\:-\@\/] of mteval-v13a: {|}~ [\]^_` space!"#$%& ()*+ :;<=>?@ /
bool is_13a_symbol(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return (u >= '{' && u <= '~') || (u >= '[' && u <= '`') || (u >= ' ' && u <= '&') ||
         (u >= '(' && u <= '+') || (u >= ':' && u <= '@') || u == '/';
}

std::vector<std::string> split_spaces(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

using NgramCounts = std::map<std::vector<std::string>, int64_t>;
NgramCounts ngrams(const std::vector<std::string>& t, size_t n) {
  NgramCounts c;
  for (size_t i = 0; i + n <= t.size(); ++i)
    ++c[std::vector<std::string>(t.begin() + long(i), t.begin() + long(i + n))];
  return c;
}

BleuScore compute(const std::vector<std::vector<std::string>>& hyps,
                  const std::vector<std::vector<std::vector<std::string>>>& refs) {
  BleuScore s;
  for (size_t i = 0; i < hyps.size(); ++i) {
    const auto& h = hyps[i];
    const int64_t hl = int64_t(h.size());
    // closest reference length (ties: the shorter), as sacreBLEU
    int64_t best = -1;
    for (const auto& r : refs[i]) {
      const int64_t rl = int64_t(r.size());
      if (best < 0 || std::llabs(rl - hl) < std::llabs(best - hl) ||
          (std::llabs(rl - hl) == std::llabs(best - hl) && rl < best))
        best = rl;
    }
    s.sys_len += hl;
    s.ref_len += best;
    for (size_t n = 1; n <= 4; ++n) {
      const NgramCounts hc = ngrams(h, n);
      NgramCounts maxref;
      for (const auto& r : refs[i])
        for (const auto& [g, c] : ngrams(r, n)) maxref[g] = std::max(maxref[g], c);
      for (const auto& [g, c] : hc) {
        auto it = maxref.find(g);
        s.matches[n - 1] += std::min(c, it == maxref.end() ? int64_t(0) : it->second);
      }
      s.totals[n - 1] += std::max<int64_t>(0, hl - int64_t(n) + 1);
    }
  }
  double smooth = 1, log_sum = 0;
  for (size_t n = 0; n < 4; ++n) {
    if (s.totals[n] == 0) {  // no n-grams of this order at all: BLEU is 0 (log 0)
      s.precisions[n] = 0;
      continue;
    }
    if (s.matches[n] == 0) {
      smooth *= 2;  // sacreBLEU's "exp" smoothing: 1 / 2^k for the k-th order without a match
      s.precisions[n] = 100.0 / (smooth * double(s.totals[n]));
    } else {
      s.precisions[n] = 100.0 * double(s.matches[n]) / double(s.totals[n]);
    }
  }
  for (size_t n = 0; n < 4; ++n)
    log_sum += s.precisions[n] > 0 ? std::log(s.precisions[n]) : -9999999999.0;
  s.brevity_penalty = s.sys_len >= s.ref_len ? 1.0
                      : s.sys_len == 0     ? 0.0
                                           : std::exp(1.0 - double(s.ref_len) / double(s.sys_len));
  s.score = s.brevity_penalty * std::exp(log_sum / 4.0);
  return s;
}

}  // namespace

std::string tokenize_13a(const std::string& line_in) {
  std::string line = line_in;
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  line = " " + line + " ";
  // 1) symbols get spaces around them
  std::string a;
  for (char c : line) {
    if (is_13a_symbol(c) && c != ' ') {
      a += ' ';
      a += c;
      a += ' ';
    } else {
      a += c;
    }
  }
  // 2) ([^0-9])([\.,]) -> \1 \2 ; 3) ([\.,])([^0-9]) -> \1 \2 (period/comma not between digits)
  // Python's re.sub scans left to right without overlap; emulate each pass separately.
  auto pass = [](const std::string& in, bool before) {
    std::string out;
    size_t i = 0;
    while (i < in.size()) {
      if (i + 1 < in.size()) {
        const char x = in[i], y = in[i + 1];
        if (before && !is_digit(x) && (y == '.' || y == ',')) {
          out += x;
          out += ' ';
          out += y;
          out += ' ';
          i += 2;
          continue;
        }
        if (!before && (x == '.' || x == ',') && !is_digit(y)) {
          out += ' ';
          out += x;
          out += ' ';
          out += y;
          i += 2;
          continue;
        }
      }
      out += in[i++];
    }
    return out;
  };
  a = pass(a, true);
  a = pass(a, false);
  // 4) ([0-9])(-) -> \1 \2
  std::string b;
  for (size_t i = 0; i < a.size(); ++i) {
    b += a[i];
    if (is_digit(a[i]) && i + 1 < a.size() && a[i + 1] == '-') {
      b += " - ";
      ++i;
    }
  }
  const std::vector<std::string> toks = split_spaces(b);
  return fmt::format("{}", fmt::join(toks, " "));
}

namespace {

// The lowercase of a code point in U+00C0..U+017F (Latin-1 letters, Latin Extended-A) or
// U+0400..U+052F (Cyrillic and its supplement), as Unicode's simple case mapping gives it; `cp`
// itself when it has none. U+0130 (İ) is left to the caller (its lowercase is two code points).
uint32_t lower_two_byte(uint32_t cp) {
  if (cp >= 0x400) {  // Cyrillic
    if (cp <= 0x40F) return cp + 0x50;  // Ѐ-Џ
    if (cp <= 0x42F) return cp + 0x20;  // А-Я
    if (cp == 0x4C0) return 0x4CF;      // Ӏ
    // pairs capital/small: Ѡ..ҁ, Ҋ..ҿ, Ӑ..ԯ with the capital even; Ӂ..ӎ with it odd
    if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48A && cp <= 0x4BF) || (cp >= 0x4D0 && cp <= 0x52F))
      return cp % 2 == 0 ? cp + 1 : cp;
    if (cp >= 0x4C1 && cp <= 0x4CE) return cp % 2 == 1 ? cp + 1 : cp;
    return cp;
  }
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 0x20;  // À-Þ, not ×
  if (cp == 0x178) return 0xFF;                                  // Ÿ -> ÿ
  const bool even = cp % 2 == 0;
  // Ā..į, Ĳ..ķ, Ŋ..ŷ: pairs capital (even), small (odd); Ĺ..ň, Ź..ž: capital odd, small even
  if ((cp >= 0x100 && cp <= 0x12F) || (cp >= 0x132 && cp <= 0x137) || (cp >= 0x14A && cp <= 0x177))
    return even ? cp + 1 : cp;
  if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return even ? cp : cp + 1;
  return cp;
}

}  // namespace

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto b = uint8_t(s[i]);
    if (b >= 'A' && b <= 'Z') {
      out += char(b - 'A' + 'a');
      continue;
    }
    // two-byte sequences C3 80..C5 BF are U+00C0..U+017F, D0 80..D4 BF U+0400..U+052F
    const bool cased = ((b >= 0xC3 && b <= 0xC5) || (b >= 0xD0 && b <= 0xD4)) && i + 1 < s.size() &&
                       (uint8_t(s[i + 1]) & 0xC0) == 0x80;
    if (!cased) {
      out += char(b);
      continue;
    }
    const uint32_t cp = (uint32_t(b & 0x1F) << 6) | (uint8_t(s[i + 1]) & 0x3F);
    ++i;
    if (cp == 0x130) {  // İ -> i + combining dot above (U+0307), as str.lower()
      out += "i\xCC\x87";
      continue;
    }
    const uint32_t lc = lower_two_byte(cp);
    out += char(0xC0 | (lc >> 6));
    out += char(0x80 | (lc & 0x3F));
  }
  return out;
}

BleuScore corpus_bleu_lowercase(const std::vector<std::string>& hypotheses,
                                const std::vector<std::vector<std::string>>& references) {
  std::vector<std::string> hyps;
  for (const std::string& h : hypotheses) hyps.push_back(lowercase(h));
  std::vector<std::vector<std::string>> refs;
  for (const auto& rs : references) {
    refs.emplace_back();
    for (const std::string& r : rs) refs.back().push_back(lowercase(r));
  }
  return corpus_bleu(hyps, refs);
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references, bool tokenize) {
  GRAFT_CHECK(hypotheses.size() == references.size(), "corpus_bleu: {} hypotheses but {} "
              "reference lists; expected one list per hypothesis", hypotheses.size(),
              references.size());
  std::vector<std::vector<std::string>> h;
  std::vector<std::vector<std::vector<std::string>>> r(references.size());
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    GRAFT_CHECK(!references[i].empty(), "corpus_bleu: hypothesis {} has no reference", i);
    h.push_back(split_spaces(tokenize ? tokenize_13a(hypotheses[i]) : hypotheses[i]));
    for (const auto& ref : references[i])
      r[i].push_back(split_spaces(tokenize ? tokenize_13a(ref) : ref));
  }
  return compute(h, r);
}

BleuScore corpus_bleu_tokens(const std::vector<std::vector<std::string>>& hypotheses,
                             const std::vector<std::vector<std::string>>& references) {
  GRAFT_CHECK(hypotheses.size() == references.size(), "corpus_bleu_tokens: {} hypotheses but {} "
              "references", hypotheses.size(), references.size());
  std::vector<std::vector<std::vector<std::string>>> r;
  for (const auto& ref : references) r.push_back({ref});
  return compute(hypotheses, r);
}

}  // namespace graft::data

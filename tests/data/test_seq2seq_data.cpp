// Seq2seq data: tokenizers and vocabulary files, the synthetic tasks (targets recomputed here
// independently), batching and masks, BLEU against hand computations and sacreBLEU fixtures.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/batching.h"
#include "data/bleu.h"
#include "data/parallel_corpus.h"
#include "data/seq2seq_tasks.h"
#include "data/tokenizer.h"
#include "ops/error.h"
#include "tests/temp_dir.h"

using namespace graft;
using namespace graft::data;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / fmt::format("graft_s2s_{}_{}", ::getpid(), name)).string();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// ---- an independent reader of the date formats (the generator's code is not used)
const char* const kMonthNames[] = {"january", "february", "march",     "april",   "may",      "june",
                                   "july",    "august",   "september", "october", "november", "december"};
const char* const kDayNames[] = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"};

// Zeller's congruence: 0 = Monday .. 6 = Sunday.
int zeller_weekday(int y, int m, int d) {
  if (m < 3) {
    m += 12;
    y -= 1;
  }
  const int K = y % 100, J = y / 100;
  const int h = (d + 13 * (m + 1) / 5 + K + K / 4 + J / 4 + 5 * J) % 7;  // 0 = Saturday
  return (h + 5) % 7;
}

bool is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }
int month_days(int y, int m) {
  const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : d[m - 1];
}

std::string suffix_for(int d) {
  if (d % 100 >= 11 && d % 100 <= 13) return "th";
  return d % 10 == 1 ? "st" : d % 10 == 2 ? "nd" : d % 10 == 3 ? "rd" : "th";
}

// Parses a source written in any of the task's formats; returns "YYYY-MM-DD" or "" if it
// cannot (unknown word, wrong ordinal suffix, weekday that does not match, ...).
std::string read_date(const std::string& src) {
  std::string s;
  for (char c : src) s += char(std::tolower(static_cast<unsigned char>(c)));
  std::vector<std::string> toks;
  std::string cur;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur += c;
    } else {
      if (!cur.empty()) toks.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) toks.push_back(cur);
  int month = 0, wday = -1;
  std::vector<std::string> nums;
  for (const std::string& t : toks) {
    size_t digits = 0;
    while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
    if (digits == t.size()) {
      nums.push_back(t);
    } else if (digits > 0) {  // ordinal: 3rd
      if (t.substr(digits) != suffix_for(std::stoi(t.substr(0, digits)))) return "";
      nums.push_back(t.substr(0, digits));
    } else if (t == "of" || t == "the") {
    } else {
      bool found = false;
      for (int i = 0; i < 12 && !found; ++i)
        if (t == kMonthNames[i] || t == std::string(kMonthNames[i]).substr(0, 3)) month = i + 1, found = true;
      for (int i = 0; i < 7 && !found; ++i)
        if (t == kDayNames[i] || t == std::string(kDayNames[i]).substr(0, 3)) wday = i, found = true;
      if (!found) return "";
    }
  }
  auto year_of = [](const std::string& y) {
    const int v = std::stoi(y);
    return y.size() == 2 ? (v >= 50 ? 1900 + v : 2000 + v) : v;
  };
  int y = 0, m = 0, d = 0;
  if (month) {
    if (nums.size() != 2) return "";
    m = month, d = std::stoi(nums[0]), y = year_of(nums[1]);
  } else if (nums.size() == 1 && nums[0].size() == 8) {
    y = std::stoi(nums[0].substr(0, 4)), m = std::stoi(nums[0].substr(4, 2)), d = std::stoi(nums[0].substr(6, 2));
  } else if (nums.size() == 3 && nums[0].size() == 4) {
    y = std::stoi(nums[0]), m = std::stoi(nums[1]), d = std::stoi(nums[2]);
  } else if (nums.size() == 3) {
    d = std::stoi(nums[0]), m = std::stoi(nums[1]), y = year_of(nums[2]);
  } else {
    return "";
  }
  if (m < 1 || m > 12 || d < 1 || d > month_days(y, m)) return "";
  if (wday >= 0 && wday != zeller_weekday(y, m, d)) return "";
  return fmt::format("{:04}-{:02}-{:02}", y, m, d);
}

}  // namespace

// ---------------------------------------------------------------- tokenizers
TEST_CASE("CharTokenizer: round trip, UTF-8 code points, unknown characters") {
  CharTokenizer tok = CharTokenizer::fit({"2021-03-03", "año nuevo"});
  CHECK(tok.vocab().token(kPad) == "<pad>");
  CHECK(tok.vocab().token(kUnk) == "<unk>");
  CHECK(tok.split("año").size() == 3);  // ñ is one token of two bytes
  for (const std::string s : {"2021-03-03", "año nuevo", "0"}) {
    const auto ids = tok.encode(s, true, true);
    CHECK(ids.front() == kBos);
    CHECK(ids.back() == kEos);
    CHECK(tok.decode(ids) == s);
  }
  const auto ids = tok.encode("2x9");  // x and 9 never seen
  REQUIRE(ids.size() == 3);
  CHECK(ids[0] == tok.vocab().id("2"));
  CHECK(ids[1] == kUnk);
  CHECK(ids[2] == kUnk);
  CHECK(tok.decode(ids) == "2<unk><unk>");
  // an invalid UTF-8 byte is a one-byte token, never a crash
  CHECK(tok.split(std::string("a\xC3") + "b").size() == 3);
  CHECK(tok.split(std::string("\xE2\x82")).size() == 2);
  CHECK_THROWS_AS(tok.decode({999}), Error);
  CHECK_THROWS_AS(tok.decode({-1}), Error);
  // decoding stops at <eos> and drops <pad>/<bos>
  CHECK(tok.decode({kBos, tok.vocab().id("2"), kEos, tok.vocab().id("0")}) == "2");
  CHECK(tok.decode({kBos, tok.vocab().id("2"), kEos}, false) == "<bos>2<eos>");
}

TEST_CASE("WordTokenizer: punctuation, lowercase, unknown words, frequency cut-off") {
  WordTokenizer tok = WordTokenizer::fit({"In the beginning, God created.", "the end"}, true,
                                         true, 1, 0);
  CHECK(tok.split("In the beginning, God.") ==
        std::vector<std::string>{"in", "the", "beginning", ",", "god", "."});
  CHECK(tok.decode(tok.encode("The end")) == "the end");
  const auto ids = tok.encode("the dragon");
  CHECK(ids[1] == kUnk);
  // most frequent first: "the" occurs twice
  CHECK(tok.vocab().id("the") == 4);
  WordTokenizer cut = WordTokenizer::fit({"a a b"}, false, true, 2, 0);
  CHECK(cut.vocab().size() == 5);
  CHECK(cut.vocab().contains("a"));
  CHECK_FALSE(cut.vocab().contains("b"));
  WordTokenizer small = WordTokenizer::fit({"a a b b b c"}, false, true, 1, 5);
  CHECK(small.vocab().size() == 5);
  CHECK(small.vocab().contains("b"));
  CHECK_THROWS_AS(Vocab::build({}, 0), Error);
  CHECK_THROWS_AS(make_tokenizer("bpe"), Error);
}

TEST_CASE("Vocab files: save/load round trip and bad files") {
  Vocab v;
  for (const std::string t : {" ", "a\\b", "line\nbreak", "\t", "é"}) v.add(t);
  const std::string path = temp_path("vocab.txt");
  v.save(path);
  const Vocab w = Vocab::load(path);
  REQUIRE(w.size() == v.size());
  for (int64_t i = 0; i < v.size(); ++i) CHECK(w.token(i) == v.token(i));
  write_file(path, "<pad>\n<bos>\n<eos>\n");
  CHECK_THROWS_AS(Vocab::load(path), Error);
  write_file(path, "<pad>\n<eos>\n<bos>\n<unk>\nx\n");
  CHECK_THROWS_AS(Vocab::load(path), Error);
  write_file(path, "<pad>\n<bos>\n<eos>\n<unk>\nx\nx\n");
  CHECK_THROWS_AS(Vocab::load(path), Error);
  write_file(path, "<pad>\n<bos>\n<eos>\n<unk>\nbad\\q\n");
  CHECK_THROWS_AS(Vocab::load(path), Error);
  fs::remove(path);
  CHECK_THROWS_AS(Vocab::load(path), Error);
}

// ---------------------------------------------------------------- tasks
TEST_CASE("copy, reverse and sort tasks: seeded, lengths in range, correct targets") {
  TaskOptions o{.min_len = 2, .max_len = 9, .num_symbols = 7};
  for (const std::string task : {"copy", "reverse", "sort"}) {
    Generator g1(5), g2(5), g3(6);
    const auto a = make_task(task, 300, o, g1), b = make_task(task, 300, o, g2),
               c = make_task(task, 300, o, g3);
    REQUIRE(a.size() == 300);
    bool same = true, differ = false;
    std::set<size_t> lens;
    for (size_t i = 0; i < a.size(); ++i) {
      same = same && a[i].source == b[i].source && a[i].target == b[i].target;
      differ = differ || a[i].source != c[i].source;
      const std::string& s = a[i].source;
      const std::string& t = a[i].target;
      lens.insert(s.size());
      CHECK(s.size() >= 2);
      CHECK(s.size() <= 9);
      for (char ch : s) CHECK(std::string("0123456").find(ch) != std::string::npos);
      REQUIRE(t.size() == s.size());
      if (task == "copy") CHECK(t == s);
      if (task == "reverse")
        for (size_t k = 0; k < s.size(); ++k) CHECK(t[k] == s[s.size() - 1 - k]);
      if (task == "sort") {
        for (size_t k = 1; k < t.size(); ++k) CHECK(t[k - 1] <= t[k]);
        std::map<char, int> cs, ct;
        for (char ch : s) ++cs[ch];
        for (char ch : t) ++ct[ch];
        CHECK(cs == ct);
      }
    }
    CHECK(same);
    CHECK(differ);
    CHECK(lens.size() == 8);  // every length 2..9 occurs
  }
  Generator g(1);
  CHECK_THROWS_AS(make_task("rotate", 3, o, g), Error);
  CHECK_THROWS_AS(make_task("copy", 3, {.min_len = 5, .max_len = 4}, g), Error);
  CHECK_THROWS_AS(make_task("copy", 3, {.min_len = 0, .max_len = 4}, g), Error);
  CHECK_THROWS_AS(make_task("copy", 3, {.num_symbols = 37}, g), Error);
  CHECK_THROWS_AS(make_task("copy", -1, o, g), Error);
}

TEST_CASE("date task: every format reads back as the target date") {
  Generator g(11);
  const auto ex = make_task("date", 3000, {}, g);
  std::set<std::string> shapes;
  for (const Example& e : ex) {
    REQUIRE(e.target.size() == 10);
    CHECK(read_date(e.source) == e.target);
    std::string shape;  // the format's outline: letters -> a, digits -> 9
    for (char c : e.source)
      shape += std::isalpha(static_cast<unsigned char>(c)) ? 'a' : std::isdigit(static_cast<unsigned char>(c)) ? '9' : c;
    shapes.insert(shape);
  }
  CHECK(shapes.size() > 40);  // many human formats
  // all formats, on dates chosen to hit the edge cases (leap day, 11th-13th, 2-digit years)
  for (const Date d : {Date{2021, 3, 3}, Date{2000, 2, 29}, Date{1950, 1, 11}, Date{2049, 12, 31},
                       Date{1999, 7, 22}, Date{2012, 8, 13}, Date{2001, 10, 1}}) {
    const std::string iso = fmt::format("{:04}-{:02}-{:02}", d.year, d.month, d.day);
    CHECK(iso_date(d) == iso);
    CHECK(weekday(d) == zeller_weekday(d.year, d.month, d.day));
    for (int f = 0; f < date_format_count(); ++f) {
      INFO(format_date(d, f));
      CHECK(read_date(format_date(d, f)) == iso);
    }
  }
  CHECK(format_date({2021, 3, 3}, 0) == "3rd of March 2021");
  CHECK(format_date({2021, 3, 3}, 1) == "Mar 3, 21");
  CHECK(format_date({2021, 3, 3}, 2) == "2021/3/3");
  CHECK_THROWS_AS(format_date({2021, 2, 29}, 0), Error);
  CHECK_THROWS_AS(format_date({2021, 3, 3}, date_format_count()), Error);
}

TEST_CASE("task splits: held-out lengths, unseen dates") {
  const TaskSplit s = make_task_split("reverse", 200, 50, 80, {.min_len = 3, .max_len = 8}, 10,
                                      20, 3);
  CHECK(s.train.size() == 200);
  CHECK(s.valid.size() == 50);
  REQUIRE(s.test.size() == 80);
  for (const auto& e : s.train) CHECK(e.source.size() <= 8);
  for (const auto& e : s.test) {
    CHECK(e.source.size() >= 10);
    CHECK(e.source.size() <= 20);
  }
  const TaskSplit d = make_task_split("date", 2000, 200, 200, {}, 0, 0, 9);
  std::set<std::string> train_src;
  for (const auto& e : d.train) train_src.insert(e.source);
  for (const auto& e : d.valid) CHECK(train_src.count(e.source) == 0);
  for (const auto& e : d.test) CHECK(train_src.count(e.source) == 0);
}

TEST_CASE("write_date_tsv: the files read back as the split --task date --seed trains on") {
  test::TempDir t("seq2seq_data", "date_tsv");
  const std::string dir = write_date_tsv(t.dir.string(), 300, 20, 30, 5);
  CHECK(dir == (t.dir / "date").string());
  const TaskSplit s = make_task_split("date", 300, 20, 30, {}, 0, 0, 5);
  auto same = [](const std::vector<Example>& a, const std::vector<Example>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].source != b[i].source || a[i].target != b[i].target) return false;
    return true;
  };
  CHECK(same(read_parallel_tsv(dir + "/train.tsv"), s.train));
  CHECK(same(read_parallel_tsv(dir + "/dev.tsv"), s.valid));
  CHECK(same(read_parallel_tsv(dir + "/test.tsv"), s.test));
  CHECK(!same(read_parallel_tsv(dir + "/train.tsv"), make_task_split("date", 300, 20, 30, {}, 0, 0, 6).train));
}

// ---------------------------------------------------------------- batching
TEST_CASE("make_seq2seq_batch: padding, lengths, masks, shifted targets") {
  const Seq2SeqBatch b = make_seq2seq_batch({{5, 6, 7}, {8}}, {{9}, {10, 11, 12, 13}});
  CHECK(b.size() == 2);
  CHECK(b.src.shape() == Shape{2, 3});
  CHECK(b.src.to_vector<int64_t>() == std::vector<int64_t>{5, 6, 7, 8, kPad, kPad});
  CHECK(b.src_lengths.to_vector<int64_t>() == std::vector<int64_t>{3, 1});
  // true = padding (PyTorch's key_padding_mask): row 1 has one real token
  CHECK(b.src_key_padding_mask.to(DType::i64).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 0, 1, 1});
  CHECK(b.tgt_in.shape() == Shape{2, 5});
  CHECK(b.tgt_in.to_vector<int64_t>() ==
        std::vector<int64_t>{kBos, 9, kPad, kPad, kPad, kBos, 10, 11, 12, 13});
  CHECK(b.tgt_out.to_vector<int64_t>() ==
        std::vector<int64_t>{9, kEos, kPad, kPad, kPad, 10, 11, 12, 13, kEos});
  CHECK(b.tgt_lengths.to_vector<int64_t>() == std::vector<int64_t>{2, 5});
  CHECK(b.target_tokens() == 7);
  const Seq2SeqBatch src_only = make_seq2seq_batch({{4, 4}});
  CHECK_FALSE(src_only.tgt_in.defined());
  CHECK_THROWS_AS(make_seq2seq_batch({}), Error);
  CHECK_THROWS_AS(make_seq2seq_batch({{1}, {}}), Error);
  CHECK_THROWS_AS(make_seq2seq_batch({{1}}, {{1}, {2}}), Error);
  CHECK(padding_mask(from_vector(std::vector<int64_t>{2, 0, 3}, {3}), 3).to(DType::i64).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 1, 1, 1, 1, 0, 0, 0});
  CHECK_THROWS_AS(padding_mask(from_vector(std::vector<int64_t>{4}, {1}), 3), Error);
}

TEST_CASE("bucket_batches: every index once, similar lengths, seeded") {
  std::vector<int64_t> lens;
  Generator lg(3);
  for (int i = 0; i < 1000; ++i) lens.push_back(1 + int64_t(philox_uniform(lg.seed, lg.advance(1)) * 50));
  Generator g1(7), g2(7);
  const auto a = bucket_batches(lens, 32, g1), b = bucket_batches(lens, 32, g2);
  CHECK(a == b);
  std::vector<int64_t> seen;
  double spread_bucketed = 0;
  for (const auto& batch : a) {
    CHECK(batch.size() <= 32);
    seen.insert(seen.end(), batch.begin(), batch.end());
    int64_t lo = 1 << 30, hi = 0;
    for (int64_t i : batch) lo = std::min(lo, lens[size_t(i)]), hi = std::max(hi, lens[size_t(i)]);
    spread_bucketed += double(hi - lo);
  }
  std::sort(seen.begin(), seen.end());
  for (int64_t i = 0; i < 1000; ++i) CHECK(seen[size_t(i)] == i);
  Generator g3(7);
  double spread_random = 0;
  for (const auto& batch : bucket_batches(lens, 32, g3, 1)) {
    int64_t lo = 1 << 30, hi = 0;
    for (int64_t i : batch) lo = std::min(lo, lens[size_t(i)]), hi = std::max(hi, lens[size_t(i)]);
    spread_random += double(hi - lo);
  }
  CHECK(spread_bucketed * 5 < spread_random);
  CHECK_THROWS_AS(bucket_batches(lens, 0, g3), Error);
}

TEST_CASE("token_batches: every index once, each batch within max_tokens and nearly full, seeded") {
  std::vector<int64_t> cost;
  Generator lg(5);
  int64_t total = 0;
  for (int i = 0; i < 3000; ++i) {
    cost.push_back(2 + int64_t(philox_uniform(lg.seed, lg.advance(1)) * 120));
    total += cost.back();
  }
  Generator g1(11), g2(11), g3(12);
  const auto a = token_batches(cost, 1000, g1), b = token_batches(cost, 1000, g2);
  CHECK(a == b);
  CHECK(a != token_batches(cost, 1000, g3));
  std::vector<int64_t> seen;
  int64_t padded = 0;
  for (const auto& batch : a) {
    REQUIRE(!batch.empty());
    int64_t widest = 0;
    for (int64_t i : batch) widest = std::max(widest, cost[size_t(i)]);
    CHECK(int64_t(batch.size()) * widest <= 1000);
    padded += int64_t(batch.size()) * widest;
    seen.insert(seen.end(), batch.begin(), batch.end());
  }
  std::sort(seen.begin(), seen.end());
  REQUIRE(seen.size() == cost.size());
  for (int64_t i = 0; i < 3000; ++i) CHECK(seen[size_t(i)] == i);
  // Sorted pools keep padding low and batches full: within 10% of the unpadded tokens, and
  // no more than 15% more batches than a perfect packing would need.
  CHECK(double(padded) < 1.10 * double(total));
  CHECK(double(a.size()) < 1.15 * double(total) / 1000.0 + 1);
  // One example longer than max_tokens, or max_tokens < 1: clear errors.
  cost.push_back(1001);
  CHECK_THROWS_WITH_AS(token_batches(cost, 1000, g1), doctest::Contains("--max-tokens 1000"), Error);
  CHECK_THROWS_AS(token_batches(cost, 0, g1), Error);
  CHECK(token_batches({}, 10, g1).empty());
}

// ---------------------------------------------------------------- BLEU
TEST_CASE("corpus_bleu: hand-computed cases") {
  CHECK(corpus_bleu({"the cat sat on the mat"}, {{"the cat sat on the mat"}}).score ==
        doctest::Approx(100.0));
  // hyp "the cat the cat" vs ref "the cat sat on the mat": 1-grams 3/4 (the x2, cat clipped
  // to 1), 2-grams 1/3, 3-grams 0/2 -> 100/(2*2), 4-grams 0/1 -> 100/(4*1); c=4, r=6
  const BleuScore s = corpus_bleu({"the cat the cat"}, {{"the cat sat on the mat"}});
  CHECK(s.matches == std::array<int64_t, 4>{3, 1, 0, 0});
  CHECK(s.totals == std::array<int64_t, 4>{4, 3, 2, 1});
  const double expected = std::exp(1.0 - 6.0 / 4.0) *
                          std::exp((std::log(75.0) + std::log(100.0 / 3) + std::log(25.0) +
                                    std::log(25.0)) / 4);
  CHECK(s.score == doctest::Approx(expected).epsilon(1e-12));
  CHECK(s.brevity_penalty == doctest::Approx(std::exp(-0.5)));
  // corpus level: counts are summed before the precisions (not an average of sentences)
  const BleuScore c = corpus_bleu({"a b c d", "x y"}, {{"a b c d"}, {"x z"}});
  CHECK(c.matches == std::array<int64_t, 4>{5, 3, 2, 1});
  CHECK(c.totals == std::array<int64_t, 4>{6, 4, 2, 1});
  CHECK(c.score == doctest::Approx(std::exp((std::log(500.0 / 6) + std::log(75.0) + std::log(100.0) +
                                             std::log(100.0)) / 4)));
  // closest reference length, the shorter on ties
  const BleuScore m = corpus_bleu({"a b c"}, {{"a b", "a b c d"}});
  CHECK(m.ref_len == 2);
  CHECK(corpus_bleu({""}, {{"a b"}}).score == 0.0);
  CHECK_THROWS_AS(corpus_bleu({"a"}, {}), Error);
  CHECK_THROWS_AS(corpus_bleu({"a"}, {{}}), Error);
}

TEST_CASE("corpus_bleu and tokenize_13a agree with sacreBLEU") {
  std::ifstream in(std::string(GRAFT_FIXTURES) + "/bleu_sacrebleu.json");
  REQUIRE(in.good());
  const nlohmann::json j = nlohmann::json::parse(in);
  REQUIRE(j["corpus_bleu"].size() >= 10);
  for (const auto& c : j["corpus_bleu"]) {
    const auto hyps = c["hyps"].get<std::vector<std::string>>();
    const auto refs = c["refs"].get<std::vector<std::vector<std::string>>>();
    const BleuScore s = corpus_bleu(hyps, refs);
    CHECK(s.score == doctest::Approx(c["score"].get<double>()).epsilon(1e-9));
    CHECK(s.sys_len == c["sys_len"].get<int64_t>());
    CHECK(s.ref_len == c["ref_len"].get<int64_t>());
    CHECK(s.brevity_penalty == doctest::Approx(c["bp"].get<double>()).epsilon(1e-9));
    for (int n = 0; n < 4; ++n) {
      CHECK(s.matches[size_t(n)] == c["counts"][size_t(n)].get<int64_t>());
      CHECK(s.totals[size_t(n)] == c["totals"][size_t(n)].get<int64_t>());
      CHECK(s.precisions[size_t(n)] == doctest::Approx(c["precisions"][size_t(n)].get<double>()).epsilon(1e-9));
    }
  }
  for (const auto& t : j["tokenize_13a"]) {
    INFO(t["line"].get<std::string>());
    CHECK(tokenize_13a(t["line"].get<std::string>()) == t["tokens"].get<std::string>());
  }
}

TEST_CASE("lowercase and case-insensitive BLEU agree with Python's str.lower() and sacreBLEU") {
  std::ifstream in(std::string(GRAFT_FIXTURES) + "/bleu_sacrebleu.json");
  REQUIRE(in.good());
  const nlohmann::json j = nlohmann::json::parse(in);
  REQUIRE(j["lowercase"].size() >= 5);
  for (const auto& t : j["lowercase"]) {
    INFO(t["line"].get<std::string>());
    CHECK(lowercase(t["line"].get<std::string>()) == t["lower"].get<std::string>());
  }
  const auto& c = j["corpus_bleu_lowercase"];
  const auto hyps = c["hyps"].get<std::vector<std::string>>();
  const auto refs = c["refs"].get<std::vector<std::vector<std::string>>>();
  CHECK(corpus_bleu_lowercase(hyps, refs).score == doctest::Approx(c["score"].get<double>()).epsilon(1e-9));
  CHECK(corpus_bleu(hyps, refs).score < c["score"].get<double>() - 10);  // the case matters here
  CHECK(lowercase("caf\xC3") == "caf\xC3");  // a truncated sequence is kept as it is
}

// ---------------------------------------------------------------- parallel corpora
TEST_CASE("parse_diatheke: verse lines, poetry continuation, titles and markup dropped") {
  const std::string text =
      "Genesis 1:1: In the beginning\n"
      "Psalms 2:12: Give sincere homage,\n"
      "for his wrath will soon be kindled. \n"
      "\n"
      "A Psalm by David.\n"
      "  Psalms 3:1: Yahweh, how <H3068> many!\n"
      "Song of Solomon 1:1: The song of songs.\n"
      "\n"
      "   A glossary that is not a verse.\n"
      "(engWEB2015eb)\n";
  const auto v = parse_diatheke(text);
  REQUIRE(v.size() == 4);
  CHECK(v[0] == std::pair<std::string, std::string>{"Genesis 1:1", "In the beginning"});
  CHECK(v[1].second == "Give sincere homage, for his wrath will soon be kindled.");
  CHECK(v[2] == std::pair<std::string, std::string>{"Psalms 3:1", "Yahweh, how many!"});
  CHECK(v[3].first == "Song of Solomon 1:1");
  CHECK(v[3].second == "The song of songs.");
}

TEST_CASE("read_parallel_tsv: two or three columns, header, bad lines") {
  const std::string path = temp_path("pairs.tsv");
  // Unix and Windows line ends: the carriage return belongs to neither side, and a "\r" line
  // is blank
  for (const std::string eol : {"\n", "\r\n"}) {
    CAPTURE(eol.size());
    write_file(path, "key\ten\tes" + eol + "Gen 1:1\tIn the beginning\tEn el principio" + eol + eol +
                         "hello\thola" + eol);
    const auto p = read_parallel_tsv(path);
    REQUIRE(p.size() == 2);
    CHECK(p[0].source == "In the beginning");
    CHECK(p[0].target == "En el principio");
    CHECK(p[1].source == "hello");
    CHECK(p[1].target == "hola");
    CHECK(read_parallel_tsv(path, 1).size() == 1);
  }
  write_file(path, "no tab here\n");
  CHECK_THROWS_AS(read_parallel_tsv(path), Error);
  write_file(path, "a\t\n");
  CHECK_THROWS_AS(read_parallel_tsv(path), Error);
  fs::remove(path);
  CHECK_THROWS_AS(read_parallel_tsv(path), Error);
}

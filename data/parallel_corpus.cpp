#include "data/parallel_corpus.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "data/text_io.h"
#include "ops/error.h"
#include "ops/file_io.h"

namespace graft::data {

namespace {

std::string collapse(const std::string& s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = !out.empty();
    } else {
      if (space) out += ' ';
      space = false;
      out += c;
    }
  }
  return out;
}

// Drops <...> markup that plain output keeps, e.g. Strong's numbers "<G5547>".
std::string strip_markup(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '<') {
      const size_t close = s.find('>', i);
      if (close != std::string::npos && close - i <= 16) {
        i = close + 1;
        out += ' ';
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

// Runs a shell command and returns its standard output (and exit status).
std::string run(const std::string& cmd, int& status) { return run_command(cmd, status, "prepare_bible_en_es"); }

// "Book C:V" -> the book name.
std::string book_of(const std::string& key) {
  const size_t sp = key.rfind(' ');
  return sp == std::string::npos ? key : key.substr(0, sp);
}

bool parse_verse_line(const std::string& line, std::string& key, std::string& text) {
  // Book names may hold spaces and digits ("1 Samuel", "Song of Solomon"): find " C:V: "
  const size_t colon2 = line.find(": ");
  if (colon2 == std::string::npos) return false;
  const size_t sp = line.rfind(' ', colon2);
  if (sp == std::string::npos || sp == 0) return false;
  const std::string cv = line.substr(sp + 1, colon2 - sp - 1);
  const size_t c = cv.find(':');
  if (c == std::string::npos || c == 0 || c + 1 >= cv.size()) return false;
  for (size_t i = 0; i < cv.size(); ++i)
    if (i != c && (cv[i] < '0' || cv[i] > '9')) return false;
  key = line.substr(0, colon2);
  text = line.substr(colon2 + 2);
  return true;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_diatheke(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string raw, key, body;
  bool open = false;  // lines continue the last verse until a blank line
  while (std::getline(in, raw)) {
    const size_t first = raw.find_first_not_of(" \t\r");
    const std::string line = first == std::string::npos ? "" : raw.substr(first);
    if (parse_verse_line(line, key, body)) {
      out.emplace_back(key, body);
      open = true;
    } else if (line.empty()) {
      open = false;  // what follows a blank line (psalm titles, a glossary) is not verse text
    } else if (open && !out.empty()) {
      out.back().second += " " + line;  // poetry: one verse over several lines
    }
  }
  for (auto& [k, t] : out) t = collapse(strip_markup(t));
  return out;
}

std::vector<Example> read_parallel_tsv(const std::string& path, int64_t limit) {
  std::ifstream in = open_text_file(path, "read_parallel_tsv", "for the Bible run 'graft data "
                                    "prepare bible-en-es' first");
  std::vector<Example> out;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line) && (limit <= 0 || int64_t(out.size()) < limit)) {
    ++lineno;
    strip_cr(line);
    if (lineno == 1) strip_bom(line);
    if (line.empty()) continue;
    std::vector<std::string> f;
    size_t start = 0, tab;
    while ((tab = line.find('\t', start)) != std::string::npos) {
      f.push_back(line.substr(start, tab - start));
      start = tab + 1;
    }
    f.push_back(line.substr(start));
    if (lineno == 1 && f.size() >= 2 && f[0] == "key") continue;
    GRAFT_CHECK(f.size() >= 2, "read_parallel_tsv: {} line {} has no tab: '{}'; expected "
                "source<TAB>target or key<TAB>source<TAB>target", path, lineno, printable(line));
    Example e{f[f.size() - 2], f[f.size() - 1]};
    GRAFT_CHECK(!e.source.empty() && !e.target.empty(), "read_parallel_tsv: {} line {} has an "
                "empty side", path, lineno);
    out.push_back(std::move(e));
  }
  GRAFT_CHECK(!out.empty(), "read_parallel_tsv: {} holds no pairs (an empty file, or only a header "
              "and blank lines); expected source<TAB>target lines", path);
  return out;
}

BibleInfo prepare_bible_en_es(const std::string& data_dir) {
  namespace fs = std::filesystem;
  const std::string en_mod = "engWEB2015eb", es_mod = "spaRV1909eb";
  int st = 0;
  auto have = [&] {
    run("command -v diatheke >/dev/null 2>&1", st);
    if (st != 0) return false;
    const std::string mods = run("diatheke -b system -k modulelist 2>/dev/null", st);
    return mods.find(en_mod) != std::string::npos && mods.find(es_mod) != std::string::npos;
  };
  // The library never installs anything: it says what is missing (./graft installs it).
  GRAFT_CHECK(have(), "prepare_bible_en_es: needs diatheke and the SWORD modules {} / {} "
              "(Debian packages diatheke sword-text-web sword-text-sparv), which are not "
              "installed; hint: sudo apt-get install diatheke sword-text-web sword-text-sparv (or "
              "run it as ./graft data prepare bible-en-es, which installs them)", en_mod, es_mod);
  auto read = [&](const std::string& mod) {
    const std::string text = run(fmt::format("diatheke -b {} -f plain -k 'Genesis 1:1-Revelation 22:21' 2>/dev/null", mod), st);
    GRAFT_CHECK(st == 0, "prepare_bible_en_es: diatheke -b {} failed (status {})", mod, st);
    return parse_diatheke(text);
  };
  const auto en = read(en_mod), es = read(es_mod);
  std::map<std::string, std::string> es_by_key(es.begin(), es.end());
  const std::set<std::string> dev_books = {"Ruth", "Jonah", "Titus", "Philemon", "Jude"};
  const std::set<std::string> test_books = {"Esther", "Mark"};
  BibleInfo info;
  info.dir = (fs::path(data_dir) / "bible-en-es").string();
  fs::create_directories(info.dir);
  std::string tr = "key\ten\tes\n", dv = tr, te = tr;
  for (const auto& [key, en_text] : en) {
    auto it = es_by_key.find(key);
    if (it == es_by_key.end() || en_text.empty() || it->second.empty()) continue;
    if (en_text.find('\t') != std::string::npos || it->second.find('\t') != std::string::npos) continue;
    const std::string book = book_of(key);
    std::string& f = dev_books.count(book) ? dv : test_books.count(book) ? te : tr;
    (dev_books.count(book) ? info.dev : test_books.count(book) ? info.test : info.train) += 1;
    f += key + '\t' + en_text + '\t' + it->second + '\n';
    ++info.pairs;
  }
  GRAFT_CHECK(info.pairs > 0 && info.train > 0 && info.test > 0,
              "prepare_bible_en_es: no aligned verses ({} English, {} Spanish verses read)",
              en.size(), es.size());
  const std::pair<const char*, const std::string*> files[] = {{"train", &tr}, {"dev", &dv}, {"test", &te}};
  for (const auto& [name, text] : files)
    atomic_write(info.dir + "/" + name + ".tsv", *text, "prepare_bible_en_es");
  atomic_write(info.dir + "/README.txt", fmt::format(
      "English-Spanish Bible verse pairs, written by 'graft data prepare bible-en-es'.\n\n"
      "English: World English Bible ({}, Debian package sword-text-web): Public Domain.\n"
      "Spanish: Reina-Valera 1909 ({}, Debian package sword-text-sparv): Public Domain.\n"
      "Read with diatheke (-f plain), aligned by book chapter:verse (Genesis..Revelation).\n\n"
      "pairs: {}  train: {}  dev: {} (Ruth, Jonah, Titus, Philemon, Jude)  test: {} (Esther, Mark)\n"
      "Columns: key<TAB>en<TAB>es (a header line first).\n",
      en_mod, es_mod, info.pairs, info.train, info.dev, info.test), "prepare_bible_en_es");
  return info;
}

}  // namespace graft::data

// Parallel corpora: a generic TSV reader and the English-Spanish Bible (verse pairs).
//
//   auto pairs = data::read_parallel_tsv("data/bible-en-es/train.tsv");   // {source, target}
//   data::BibleInfo info = data::prepare_bible_en_es("data");             // graft data prepare
//
// The Bible pairs come from two public-domain SWORD modules packaged by Debian:
// sword-text-web (World English Bible, engWEB2015eb) and sword-text-sparv (Reina-Valera 1909,
// spaRV1909eb), read with Debian's `diatheke` tool (package diatheke). Verses are aligned by
// book, chapter and verse over the 66 books of the Protestant canon (Genesis..Revelation);
// verses empty on either side are dropped. The split is by book, fixed:
//   dev  = Ruth, Jonah, Titus, Philemon, Jude       test = Esther, Mark       train = the rest
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/seq2seq_tasks.h"

namespace graft::data {

// Lines "source<TAB>target" or "key<TAB>source<TAB>target" (the last two columns are used);
// a first line "key<TAB>en<TAB>es" style header (first field "key") is skipped. Empty lines
// are skipped; so is a '\r' before the line break (CRLF files). graft::Error for a missing
// file, a line without a tab, an empty side, or a file with no pairs at all.
std::vector<Example> read_parallel_tsv(const std::string& path, int64_t limit = 0);

struct BibleInfo {
  std::string dir;  // data_dir/bible-en-es
  int64_t pairs = 0, train = 0, dev = 0, test = 0;
};

// Writes data_dir/bible-en-es/{train,dev,test}.tsv ("key<TAB>en<TAB>es") and README.txt
// (sources, licences, sizes). If diatheke or the modules are missing it tries
// `apt-get install -y diatheke sword-text-web sword-text-sparv` (with sudo when not root).
// graft::Error when that fails or the modules yield no verses.
BibleInfo prepare_bible_en_es(const std::string& data_dir);

// Parses diatheke's plain output: a line "Book C:V: text" (leading spaces allowed) starts a
// verse, the lines after it continue it until a blank line (what follows a blank line, e.g.
// psalm titles or the module's glossary, is dropped). <...> markup (Strong's numbers) is
// removed. Returns (key "Book C:V", text) pairs in order, whitespace collapsed.
std::vector<std::pair<std::string, std::string>> parse_diatheke(const std::string& text);

}  // namespace graft::data

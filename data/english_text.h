// An English corpus for BERT pretraining from public-domain text packaged by Debian:
//
//   * the World English Bible (sword-text-web, module engWEB2015eb, public domain), read with
//     diatheke and data/parallel_corpus.h's parse_diatheke: one document per chapter;
//   * WordNet 3.0 glosses and example sentences (wordnet-base, WordNet licence: free use with
//     the copyright notice kept), read with data/pairs.h's read_wordnet_synsets: one document
//     per lexicographer file (noun.animal, verb.motion, ...), each synset contributing its gloss
//     (as a sentence) and its example sentences. Synsets of the dev and test splits of the
//     wordnet-lexname fine-tuning task (data/wordnet_lexnames.h) are left out, so pretraining
//     never sees an evaluation gloss.
//
//   data::EnglishTextInfo info = data::prepare_english_text("datasets");  // graft data prepare
//   // datasets/english-text/corpus.txt: one sentence per line, a blank line between documents
//
// The sentences are data/bert_pretraining.h's split_sentences of each document; the file is
// written atomically, with README.txt (sources, licences, sizes) next to it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace graft::data {

struct EnglishTextInfo {
  std::string path;  // data_dir/english-text/corpus.txt
  int64_t documents = 0, sentences = 0, bytes = 0;
  int64_t bible_documents = 0, bible_sentences = 0;
  int64_t wordnet_documents = 0, wordnet_sentences = 0;
};

// Bible verses (key "Book C:V", text) -> one document per chapter (verses joined by spaces).
std::vector<std::string> bible_chapters(const std::vector<std::pair<std::string, std::string>>& verses);

// Writes documents as the BERT convention: each document's split_sentences one per line, a
// blank line after each document; documents without sentences are skipped. Returns the
// numbers of documents and sentences written.
std::pair<int64_t, int64_t> write_documents(std::string& out, const std::vector<std::string>& documents);

// Builds data_dir/english-text/{corpus.txt,README.txt}. Installs diatheke, sword-text-web and
// wordnet-base with apt-get (sudo when not root) if missing. graft::Error when a source stays
// unavailable or yields nothing.
EnglishTextInfo prepare_english_text(const std::string& data_dir,
                                     const std::string& wordnet_dir = "/usr/share/wordnet");

}  // namespace graft::data

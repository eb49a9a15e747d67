// The small recurrent Seq2Seq that tests of several suites train or probe.
#pragma once
#include <cstdint>
#include <string>

#include "models/seq2seq.h"

namespace graft::testing {

// One layer over a 12-id vocabulary (the 4 specials and 8 symbols) on both sides, with
// embed = hidden = width.
inline models::Seq2SeqOptions tiny_seq2seq(int64_t width, const std::string& cell,
                                           const std::string& attention) {
  models::Seq2SeqOptions o;
  o.src_vocab = o.tgt_vocab = 12;
  o.embed = o.hidden = width;
  o.cell = cell;
  o.attention = attention;
  return o;
}

}  // namespace graft::testing

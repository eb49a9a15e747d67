// `graft train bert-pretrain --export DIR`: the run's exact pretraining inputs for another
// framework (bench/reference/bert_pretrain_hf.py trains Hugging Face's BertForPreTraining on
// them): the same examples, the same batches, the same initial weights.
//
//   DIR/train.jsonl   one training example per line: {"input_ids": [...], "token_type_ids":
//                     [...], "masked": [[position, original id], ...], "next_sentence_label": 0|1}
//   DIR/eval.jsonl    the held-out examples, the same way (the eval metrics are computed on them)
//   DIR/epochs.jsonl  line e: the order of the training examples in epoch e (step s with batch
//                     B reads positions s*B .. s*B+B-1 of the concatenated epochs)
//   DIR/init/         config.json, model.safetensors, vocab.txt: the initial weights under HF's
//                     names (BertForPreTraining.from_pretrained and --init-hf read it)
//   DIR/vocab.txt     the WordPiece vocabulary
//   DIR/settings.json steps, batch, lr, warmup, weight decay, clip norm, seed, max_seq_len
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/bert_pretraining.h"
#include "data/wordpiece.h"
#include "models/bert.h"

namespace graft::tools {

// Refuses (graft::Error, nothing written) a DIR that exists and is not empty. epochs: the
// permutations epoch 0, 1, ... that cover the run's steps * batch examples.
void export_pretraining(const std::string& dir, const std::vector<data::BertExample>& train,
                        const std::vector<data::BertExample>& eval,
                        const std::vector<std::vector<int64_t>>& epochs,
                        const data::WordPieceTokenizer& tok, const models::BertForPreTraining& init,
                        const nlohmann::ordered_json& settings);

}  // namespace graft::tools

#!/bin/sh
# Reproduces docs/bert.md's results: the english-text corpus, BERT-tiny pretraining (MLM + NSP)
# for a fixed budget, then wordnet-lexname fine-tuning from the pretrained encoder and from a
# random one (same vocabulary, config, steps and seed), and the curves (graft plot).
# Usage: examples/bert_results.sh [BUILD_DIR] (default build); writes under out/bert/.
set -eu
B=${1:-build}
G="$B/tools/graft"
O=out/bert
mkdir -p "$O"
"$G" data prepare english-text --data-dir "$O/datasets"
"$G" train bert-pretrain --size tiny --corpus "$O/datasets/english-text/corpus.txt" \
  --vocab-size 5000 --vocab-lines 30000 --max-seq-len 64 --batch 32 --steps 300 --lr 1e-3 \
  --eval-every 50 --eval-examples 256 --checkpoint-every 100 --run-dir "$O/pretrain-tiny" \
  --overwrite >"$O/pretrain-tiny.json"
"$G" plot "$O/pretrain-tiny"
for w in pretrained random; do
  "$G" train bert-finetune --init "$O/pretrain-tiny" --init-weights "$w" --max-seq-len 32 \
    --steps 1000 --batch 32 --lr 5e-4 --eval-every 250 --eval-size 2000 \
    --run-dir "$O/finetune-$w" --overwrite >"$O/finetune-$w.json"
  "$G" plot "$O/finetune-$w"
done
cat "$O/pretrain-tiny.json" "$O"/finetune-*.json

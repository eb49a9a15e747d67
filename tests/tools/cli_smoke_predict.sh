#!/bin/sh
# Smoke test of pretrained models and inference from the CLI:
#   graft train bert-finetune --init-hf DIR   (a Hugging Face save_pretrained directory: the
#                                              tests/fixtures/bert_hf fixture, written by transformers)
#   graft predict RUN_DIR                     (labels, --probs, one line out per line in)
#   graft sample RUN_DIR                      (a tiny graft train gpt run)
# Output shapes and formats, determinism with a seed, and exit status 1 (bad input) or 2 (usage)
# for bad cases. Tiny models; bert-finetune runs when wordnet-base is installed.
#   sh tests/tools/cli_smoke_predict.sh build/tools/graft tests/fixtures/bert_hf
set -eu
G=$1
HF=$2
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
export OMP_NUM_THREADS=1

fail() { echo "cli_smoke_predict: $*" >&2; exit 1; }
# run_rc CMD...: runs graft CMD... (output in $d/out, $d/err) and prints its exit status.
run_rc() { rc=0; "$G" "$@" >"$d/out" 2>"$d/err" || rc=$?; echo "$rc"; }
# expect RC NEEDLE CMD...: graft CMD... exits RC and says NEEDLE on stderr.
expect() {
  want=$1 needle=$2; shift 2
  rc=$(run_rc "$@")
  [ "$rc" -eq "$want" ] || { cat "$d/err" >&2; fail "graft $*: exit $rc, expected $want"; }
  grep -q -- "$needle" "$d/err" || { cat "$d/err" >&2; fail "graft $*: no '$needle' in the error"; }
}
# losses RUN_DIR: the training losses of RUN_DIR/metrics.jsonl, one per line.
losses() { sed -n 's/^{"step":[0-9]*,"loss":\([^,]*\),.*/\1/p' "$1/metrics.jsonl"; }

# ------------------------------------------------------------------ graft sample
"$G" train gpt --steps 20 --d-model 16 --heads 2 --layers 1 --ffn 32 --context 32 --batch 8 \
  --samples 0 --run-dir "$d/gpt" >"$d/out" 2>&1 || { cat "$d/out" >&2; fail "train gpt failed"; }
[ -s "$d/gpt/model.safetensors" ] && [ -s "$d/gpt/vocab.txt" ] || fail "train gpt wrote no model"
S="sample $d/gpt --prompt 3rd --tokens 12 --samples 3"
# shellcheck disable=SC2086
"$G" $S --seed 5 >"$d/s1"
# shellcheck disable=SC2086
"$G" $S --seed 5 >"$d/s2"
# shellcheck disable=SC2086
"$G" $S --seed 6 --temperature 1.5 >"$d/s3"
[ "$(wc -l <"$d/s1")" -eq 3 ] || fail "sample --samples 3 printed $(wc -l <"$d/s1") lines"
while IFS= read -r line; do
  case $line in 3rd*) ;; *) fail "a sample does not start with the prompt: '$line'" ;; esac
  [ "${#line}" -le 15 ] || fail "a sample is longer than the prompt + --tokens 12: '$line'"
done <"$d/s1"
cmp -s "$d/s1" "$d/s2" || fail "sample: the same --seed gave different text"
if cmp -s "$d/s1" "$d/s3"; then fail "sample: another --seed and temperature gave the same 3 samples"; fi
# sample i uses seed + i: the second line of seed 5 is the first line of seed 6
"$G" sample "$d/gpt" --prompt 3rd --tokens 12 --seed 6 >"$d/s4"
[ "$(sed -n 2p "$d/s1")" = "$(cat "$d/s4")" ] || fail "sample: line 2 of --seed 5 differs from --seed 6"
# greedy decoding ignores the seed: every line the same
"$G" sample "$d/gpt" --prompt 3rd --tokens 12 --temperature 0 --samples 2 --seed 1 >"$d/g1"
"$G" sample "$d/gpt" --prompt 3rd --tokens 12 --temperature 0 --seed 9 >"$d/g2"
[ "$(sed -n 1p "$d/g1")" = "$(sed -n 2p "$d/g1")" ] && [ "$(sed -n 1p "$d/g1")" = "$(cat "$d/g2")" ] ||
  fail "sample --temperature 0 depends on the seed"
# an empty prompt works (the model starts a line)
[ "$("$G" sample "$d/gpt" --tokens 5 | wc -l)" -eq 1 ] || fail "sample with no --prompt"
# bad input: exit 1 with a clear message; bad flags: exit 2
expect 1 "not in the run's vocabulary" sample "$d/gpt" --prompt "3rd €"
expect 1 "exceed the model's context" sample "$d/gpt" --prompt 3rd --tokens 40
expect 1 "no run directory" sample "$d/nowhere"
expect 1 "holds no model.safetensors" sample "$d"
expect 2 "top-k" sample "$d/gpt" --top-k -1
expect 2 "run_dir" sample

# ------------------------------------------------------------------ graft predict: abcnn pairs
"$G" train abcnn --data synthetic --variant 3 --embed-dim 8 --channels 8 --batch 8 --steps 20 \
  --eval-every 0 --run-dir "$d/ab" >"$d/out" 2>&1 || { cat "$d/out" >&2; fail "train abcnn failed"; }
printf 'w1 w2 w3 w4\tw4 w3 w2 w9\nw1 w2 w3 w4\tw20 w21 w22 w23\nW5 zebra\tw5\n\tw1\n' >"$d/pairs.tsv"
"$G" predict "$d/ab" --input "$d/pairs.tsv" >"$d/a1" || fail "predict (abcnn) failed"
"$G" predict "$d/ab" --probs --batch 1 <"$d/pairs.tsv" >"$d/a2"
[ "$(wc -l <"$d/a1")" -eq 4 ] || fail "predict (abcnn): $(wc -l <"$d/a1") lines for 4 pairs"
grep -Evq '^[01]$' "$d/a1" && { cat "$d/a1" >&2; fail "predict (abcnn): a label is not 0 or 1"; }
cut -f1 "$d/a2" | cmp -s - "$d/a1" || fail "predict (abcnn) --probs --batch 1: other labels"
awk -F '\t' 'NF != 2 || $2 < 0.5 || $2 > 1 { exit 1 }' "$d/a2" || { cat "$d/a2" >&2; fail "predict (abcnn) --probs: not label<TAB>p >= 0.5"; }
printf 'no tab here\n' >"$d/notab.txt"
expect 1 "must be a sentence pair" predict "$d/ab" --input "$d/notab.txt"
expect 1 "(its model: abcnn); classify with it" sample "$d/ab"

# ------------------------------------------------------------------ bert-finetune --init-hf, predict
expect 2 "conflicts with --init" train bert-finetune --init-hf "$HF" --init "$d/gpt" --steps 2
expect 1 "vocab.txt" train bert-finetune --init-hf "$d/nowhere" --steps 2 --run-dir ""
expect 1 "(its model: gpt); sample from it" predict "$d/gpt" --input /dev/null
expect 1 "no run directory" predict "$d/nowhere"
expect 2 "run_dir" predict

if [ -f /usr/share/wordnet/data.noun ]; then
  BF="train bert-finetune --init-hf $HF --train-size 64 --batch 8 --eval-size 16 --test-size 32 --max-seq-len 32 --warmup 2 --steps 6 --eval-every 0"
  # shellcheck disable=SC2086
  "$G" $BF --run-dir "$d/bf" >"$d/out" 2>"$d/err" || { cat "$d/err" >&2; fail "bert-finetune --init-hf failed"; }
  grep -q '"encoder": "pretrained"' "$d/out" || fail "bert-finetune --init-hf: no pretrained result line"
  grep -q "\"init\": \"$HF\"" "$d/out" || fail "bert-finetune --init-hf: the result line does not name the directory"
  # the HF weights are what it starts from: --init-weights random (same seed) gives other losses
  # shellcheck disable=SC2086
  "$G" $BF --init-weights random --run-dir "$d/bf-random" >"$d/out" 2>&1 || fail "bert-finetune --init-weights random failed"
  [ "$(losses "$d/bf" | head -n 1)" != "$(losses "$d/bf-random" | head -n 1)" ] ||
    fail "bert-finetune: --init-hf and --init-weights random start from the same loss"
  [ -s "$d/bf/model.safetensors" ] && [ -s "$d/bf/vocab.txt" ] || fail "bert-finetune wrote no model for predict"

  printf 'a domesticated carnivorous mammal\nmove fast by using the legs\n\nhaving a bright colour\na unit of time\n' >"$d/in.txt"
  "$G" predict "$d/bf" --input "$d/in.txt" >"$d/p1" || fail "predict failed"
  [ "$(wc -l <"$d/p1")" -eq 5 ] || fail "predict: $(wc -l <"$d/p1") lines for 5 inputs"
  grep -Evq '^(noun|verb|adj|adv)\.[A-Za-z]+$' "$d/p1" && { cat "$d/p1" >&2; fail "predict: a line is not a lexname"; }
  # stdin, --probs: the same labels, then a probability at least 1/45 (the arg-max of 45 classes)
  "$G" predict "$d/bf" --probs <"$d/in.txt" >"$d/p2"
  cut -f1 "$d/p2" | cmp -s - "$d/p1" || fail "predict --probs (stdin): other labels than predict --input"
  awk -F '\t' 'NF != 2 || $2 !~ /^[01]\.[0-9][0-9][0-9][0-9]$/ || $2 < 1 / 45 || $2 > 1 { exit 1 }' "$d/p2" ||
    { cat "$d/p2" >&2; fail "predict --probs: not label<TAB>probability"; }
  # deterministic, and one example per batch gives the same labels as a padded batch
  "$G" predict "$d/bf" --input "$d/in.txt" --batch 1 >"$d/p3"
  cmp -s "$d/p1" "$d/p3" || fail "predict --batch 1 gave other labels"
  printf 'a\tb\n' >"$d/tab.txt"
  expect 1 "line 1 holds a tab" predict "$d/bf" --input "$d/tab.txt"
  expect 1 "cannot read --input" predict "$d/bf" --input "$d/no-such.txt"
  expect 1 "(its model: bert-finetune); classify with it" sample "$d/bf"

  # wordnet-gloss-match: sentence pairs, [CLS] A [SEP] B [SEP] with segments 0 and 1
  # shellcheck disable=SC2086
  "$G" $BF --task wordnet-gloss-match --run-dir "$d/gm" >"$d/out" 2>"$d/err" ||
    { cat "$d/err" >&2; fail "bert-finetune --task wordnet-gloss-match failed"; }
  grep -q '"task": "wordnet-gloss-match"' "$d/out" || fail "gloss-match: no result line"
  grep -Eq 'train 64, dev [0-9]{4,}, test [0-9]{4,} pairs, 2 classes' "$d/err" ||
    { cat "$d/err" >&2; fail "gloss-match: not 64 training pairs and thousands of dev/test pairs"; }
  printf 'the dog barked all night\ta domesticated carnivorous mammal\nhe ran to the store\tmove fast by using the legs\nshe sat\ta unit of time\n' >"$d/gm.tsv"
  "$G" predict "$d/gm" --probs --input "$d/gm.tsv" >"$d/g1" || fail "predict (gloss-match) failed"
  [ "$(wc -l <"$d/g1")" -eq 3 ] || fail "predict (gloss-match): $(wc -l <"$d/g1") lines for 3 pairs"
  awk -F '\t' 'NF != 2 || ($1 != 0 && $1 != 1) || $2 < 0.5 || $2 > 1 { exit 1 }' "$d/g1" ||
    { cat "$d/g1" >&2; fail "predict (gloss-match) --probs: not 0|1<TAB>p >= 0.5"; }
  "$G" predict "$d/gm" --probs --batch 1 <"$d/gm.tsv" >"$d/g2"
  cmp -s "$d/g1" "$d/g2" || fail "predict (gloss-match) --batch 1: other probabilities than a padded batch"
  expect 1 "needs exactly one tab" predict "$d/gm" --input "$d/in.txt"
  # training and predict encode a pair alike: predict's accuracy on the 25 evenly spaced test
  # pairs the run scores (rows i * n / 25) is the run's test_accuracy (k / 25: four exact
  # decimals). The model: a vocabulary trained on the pairs' words (the fixture's knows few of
  # them), 32 training pairs learnt by heart, so that its predictions depend on the input.
  "$G" train abcnn --data wordnet --data-dir "$d/wp" --steps 1 --eval-every 0 --run-dir "" >/dev/null 2>&1 ||
    fail "train abcnn --data wordnet (writing the pair TSVs) failed"
  head -n 3000 "$d/wp/train.tsv" | awk -F '\t' '{ print $2; print $3 } NR % 40 == 0 { print "" }' >"$d/pairs-corpus.txt"
  "$G" train bert-pretrain --corpus "$d/pairs-corpus.txt" --vocab-size 1500 --hidden 32 --layers 1 --heads 2 \
    --ffn 64 --max-seq-len 32 --steps 1 --eval-every 0 --run-dir "$d/bp-pairs" >/dev/null 2>&1 ||
    fail "bert-pretrain on the pairs' text failed"
  n=$(wc -l <"$d/wp/test.tsv")
  awk -F '\t' -v n="$n" 'BEGIN { for (i = 0; i < 25; i++) keep[int(i * n / 25)] = 1 }
    (NR - 1) in keep { print $2 "\t" $3 > "'"$d"'/t25.tsv"; print $1 > "'"$d"'/t25.gold" }' "$d/wp/test.tsv"
  "$G" train bert-finetune --init "$d/bp-pairs" --task wordnet-gloss-match --train-size 32 --batch 16 --lr 1e-2 \
    --dropout 0 --steps 60 --warmup 2 --test-size 25 --max-seq-len 32 --eval-every 0 --run-dir "$d/gm25" >"$d/out" 2>"$d/err" ||
    { cat "$d/err" >&2; fail "bert-finetune --task wordnet-gloss-match --test-size 25 failed"; }
  "$G" predict "$d/gm25" --input "$d/t25.tsv" >"$d/t25.pred" || fail "predict (gloss-match, test pairs) failed"
  [ "$(sort -u "$d/t25.pred" | wc -l)" -eq 2 ] || fail "gloss-match: the test model predicts one label for every pair"
  acc=$(paste "$d/t25.pred" "$d/t25.gold" | awk '$1 == $2 { k++ } END { printf "%.2f", k / 25 }')
  run_acc=$(sed -n 's/.*"test_accuracy": \([0-9.]*\).*/\1/p' "$d/out")
  awk -v a="$acc" -v b="$run_acc" 'BEGIN { exit !(b != "" && a - b < 1e-9 && b - a < 1e-9) }' ||
    { cat "$d/out" >&2; fail "gloss-match: predict scores $acc on the run's 25 test pairs, the run $run_acc"; }
fi
echo "cli smoke predict/sample: ok"

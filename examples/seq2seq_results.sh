#!/bin/sh
# Reproduces the results tables of docs/seq2seq.md: each run is one `graft train seq2seq`
# (1 thread) whose results.json / log land in OUT/<part>/<name>/; then
# examples/seq2seq_tables.sh OUT prints the markdown tables.
#
#   examples/seq2seq_results.sh GRAFT OUT PART...   PART: date hard length bible
#   examples/seq2seq_results.sh build/tools/graft out/s2s date hard
#
# Budgets are sized for a loaded 2-core machine (see the docs for the wall times measured).
set -eu
G=$1
OUT=$2
shift 2
export OMP_NUM_THREADS=1

run() {  # run PART NAME ARGS...: one training run, its log in OUT/PART/NAME.log
  part=$1
  name=$2
  shift 2
  mkdir -p "$OUT/$part"
  echo "$(date +%T) $part/$name: graft train seq2seq $*" >&2
  "$G" train seq2seq --threads 1 --run-dir "$OUT/$part/$name" --overwrite "$@" \
    >"$OUT/$part/$name.log" 2>&1
}

# Date normalisation: LSTM (embed 64, hidden 128), 20k generated pairs, batch 64, Adam 2e-3;
# greedy validation exact match on 500 pairs every 100 steps, stop at >= 99%.
date_runs() {
  for att in none bahdanau general local-p; do
    run date "$att" --task date --cell lstm --attention "$att" --steps 6000 \
      --eval-every 100 --eval-size 500 --target 0.99
  done
}

# Hard (REINFORCE) vs soft (Bahdanau) attention, the same fixed budget of 800 steps.
hard_runs() {
  for att in hard bahdanau; do
    run hard "$att" --task date --cell lstm --attention "$att" --steps 800 \
      --eval-every 200 --eval-size 500
  done
}

# Length generalisation: train on lengths 3..30, test 700 strings of lengths 10..80 in
# buckets of 10; LSTM (embed 32, hidden 128), 10 symbols, 2000 steps of 64.
length_runs() {
  for task in reverse copy; do
    for att in none bahdanau general local-p; do
      run length "$task-$att" --task "$task" --cell lstm --attention "$att" --embed 32 \
        --hidden 128 --min-len 3 --max-len 30 --test-min-len 10 --test-max-len 80 \
        --test-size 700 --steps 2000 --eval-every 500 --eval-size 200
    done
  done
}

# Bible EN->ES: word level (lowercased, 4000-word vocabularies), GRU + Luong general
# attention, embed 128, hidden 192, batch 32, Adam 3e-3, a wall-clock budget of 20 minutes of
# training (the steps it reaches depend on the machine's load); test = the whole test split
# (845 verses, Esther and Mark), beam 5, sacreBLEU-style corpus BLEU.
bible_runs() {
  "$G" data prepare bible-en-es --data-dir "$OUT/data" >&2
  run bible gru-general-20min --task bible --data-dir "$OUT/data" --cell gru --attention general \
    --embed 128 --hidden 192 --vocab-size 4000 --batch 32 --lr 3e-3 --train-size 30008 \
    --steps 100000 --time-budget 1200 --eval-every 0 --test-size 845 --beam 5
}

for part in "$@"; do
  case $part in
    date) date_runs ;;
    hard) hard_runs ;;
    length) length_runs ;;
    bible) bible_runs ;;
    *) echo "unknown part '$part' (date, hard, length, bible)" >&2; exit 2 ;;
  esac
done

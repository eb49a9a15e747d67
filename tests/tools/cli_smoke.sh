#!/bin/sh
# Smoke test of the CLI's training and inspection commands: each runs a few steps of a tiny
# model and must exit 0 with its expected output; bad flags must exit 2 (CLI11's usage error).
set -eu
G=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
export OMP_NUM_THREADS=1

# step_lines RUN_DIR: the step numbers of the training lines of RUN_DIR/metrics.jsonl, in order.
step_lines() { sed -n 's/^{"step":\([0-9]*\),"loss".*/\1/p' "$1/metrics.jsonl"; }

# wait_for PID RUN_DIR STEP [checkpoint]: polls (up to ~60 s) until RUN_DIR/metrics.jsonl has
# logged STEP steps (and, with a 4th argument, RUN_DIR/checkpoint.json exists) while process
# PID still runs; fails if PID ends first.
wait_for() {
  n=0
  while [ "$(step_lines "$2" 2>/dev/null | wc -l)" -lt "$3" ] || { [ $# -gt 3 ] && [ ! -f "$2/checkpoint.json" ]; }; do
    if ! kill -0 "$1" 2>/dev/null; then echo "$2: the run ended before step $3${4:+ and a checkpoint}" >&2; return 1; fi
    n=$((n + 1)); [ $n -lt 6000 ] || { echo "$2: not at step $3 after 60 s" >&2; return 1; }
    sleep 0.01
  done
}

# kill_and_resume RUN_DIR STEPS ARGS...: runs `graft ARGS... --run-dir RUN_DIR --steps STEPS
# --checkpoint-every 2` in the background, kill -9s it at a random step in [4, STEPS/2] once it
# has a checkpoint, then runs the same command with --resume. The resumed run must exit 0, end
# at STEPS (checkpoint.json), log every step 1..STEPS exactly once in metrics.jsonl, and keep
# the killed run's best_model.safetensors if it had one. Choose STEPS (>= 16) so that a run
# lasts a few tenths of a second at least; the killed run's output is in RUN_DIR.killed.
kill_and_resume() {
  run=$1; steps=$2; shift 2
  at=$(($(od -An -N2 -tu2 /dev/urandom) % (steps / 2 - 3) + 4))
  "$G" "$@" --run-dir "$run" --steps "$steps" --checkpoint-every 2 >"$run.killed" 2>&1 &
  pid=$!
  wait_for "$pid" "$run" "$at" checkpoint || { cat "$run.killed" >&2; return 1; }
  if ! kill -9 "$pid" 2>/dev/null; then
    echo "kill_and_resume $run: the run finished before the kill; raise STEPS" >&2; return 1
  fi
  rc=0; wait "$pid" || rc=$?
  [ "$rc" -eq 137 ] || { echo "kill_and_resume $run: killed run exited $rc, expected 137" >&2; return 1; }
  had_best=0; [ -f "$run/best_model.safetensors" ] && had_best=1
  rc=0
  "$G" "$@" --run-dir "$run" --steps "$steps" --checkpoint-every 2 --resume >"$run.out" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "kill_and_resume $run: the resumed run exited $rc" >&2; cat "$run.out" >&2; return 1
  fi
  grep -q "\"step\": *${steps}[,}]" "$run/checkpoint.json" ||
    { echo "kill_and_resume $run: checkpoint.json is not at step $steps" >&2; cat "$run/checkpoint.json" >&2; return 1; }
  if [ "$(step_lines "$run" | tr '\n' ' ')" != "$(seq 1 "$steps" | tr '\n' ' ')" ]; then
    echo "kill_and_resume $run: metrics.jsonl does not log steps 1..$steps once each" >&2; return 1
  fi
  if [ $had_best -eq 1 ] && [ ! -s "$run/best_model.safetensors" ]; then
    echo "kill_and_resume $run: best_model.safetensors was lost" >&2; return 1
  fi
}

# interrupt_run RUN_DIR ARGS...: starts `graft ARGS... --run-dir RUN_DIR` (a long run), sends
# SIGINT after step 5 and expects exit status 130 with a checkpoint at the last logged step.
interrupt_run() {
  run=$1; shift
  "$G" "$@" --run-dir "$run" --steps 1000000 --checkpoint-every 100000 >"$run.out" 2>&1 &
  pid=$!
  wait_for "$pid" "$run" 5 || { cat "$run.out" >&2; return 1; }
  kill -INT "$pid"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" -eq 130 ] || { echo "interrupt_run $run: exit $rc after SIGINT, expected 130" >&2; cat "$run.out" >&2; return 1; }
  last=$(step_lines "$run" | tail -n 1)
  grep -q "\"step\": *${last}," "$run/checkpoint.json" ||
    { echo "interrupt_run $run: no checkpoint at the last step, $last" >&2; return 1; }
}

"$G" train seq2seq --task reverse --steps 40 --eval-every 20 --hidden 32 --embed 16 \
  --train-size 300 --valid-size 30 --test-size 30 --run-dir "$d/s2s" \
  --test-min-len 4 --test-max-len 11 --length-bin 4 --target-exact 0.99 >"$d/out" 2>&1
test -s "$d/s2s/model.safetensors"
# the held-out lengths 4..11 in buckets of 4: rows 4-7 and 8-11, and nothing else
grep -Eq '^ +4-7 ' "$d/out" && grep -Eq '^ +8-11 ' "$d/out"
test "$(grep -c '"from"' "$d/s2s/results.json")" -eq 2
# a wall-clock budget far below one step: exactly one step runs, then the test evaluation
"$G" train seq2seq --task copy --steps 500 --eval-every 0 --hidden 16 --embed 8 --train-size 100 \
  --valid-size 10 --test-size 10 --time-budget 0.000001 --run-dir "$d/s2s-t" >"$d/out" 2>&1
grep -q '"steps": 1,' "$d/s2s-t/results.json" && grep -q '"stop_reason": "time_budget"' "$d/s2s-t/results.json"
"$G" translate --run-dir "$d/s2s" abc --beam 3 --heatmap "$d/h.png" >"$d/out" 2>&1
grep -q "wrote" "$d/out"
test -s "$d/h.png"
"$G" train abcnn --data synthetic --variant 3 --steps 20 >"$d/out" 2>"$d/err"
grep -q '"test_accuracy"' "$d/out"
"$G" train transformer --task reverse --steps 10 --d-model 16 --heads 2 --layers 1 --ffn 32 \
  --train-size 200 --test-size 20 >"$d/out" 2>&1
# --init reaches the model: the saved options name it and the weights differ from the default's
"$G" train transformer --task reverse --steps 1 --d-model 16 --heads 2 --layers 1 --ffn 32 \
  --train-size 200 --test-size 2 --init xavier --run-dir "$d/tf-xavier" >"$d/out" 2>&1
"$G" train transformer --task reverse --steps 1 --d-model 16 --heads 2 --layers 1 --ffn 32 \
  --train-size 200 --test-size 2 --run-dir "$d/tf-layers" >"$d/out" 2>&1
grep -q '"init": "xavier"' "$d/tf-xavier/config.json"
python3 - "$d/tf-xavier/model.safetensors" "$d/tf-layers/model.safetensors" <<'PY'
import json, struct, sys
def tensor(path, name):  # safetensors: u64 header length, JSON header, raw data
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        a, b = h[name]["data_offsets"]
        f.seek(8 + n + a)
        return f.read(b - a)
w = "encoder.layers.0.linear2.weight"
sys.exit(f"--init xavier left {w} as the default init made it" if tensor(sys.argv[1], w) == tensor(sys.argv[2], w) else 0)
PY
"$G" train gpt --steps 10 --d-model 16 --heads 2 --layers 1 --ffn 32 >"$d/out" 2>&1
# transformer with nn::Trainer: a run cut at step 6 and resumed logs the same 12 losses as an
# uninterrupted run; translate reads the run directory and draws a cross-attention head
TF="train transformer --task reverse --d-model 16 --heads 2 --layers 1 --ffn 32 --train-size 200 --test-size 10"
losses() { sed -n 's/.*"loss":\([^,]*\),.*/\1/p' "$1/metrics.jsonl"; }
# shellcheck disable=SC2086
"$G" $TF --steps 12 --run-dir "$d/tf" >"$d/out" 2>&1
# shellcheck disable=SC2086
"$G" $TF --steps 6 --run-dir "$d/tfr" >"$d/out" 2>&1
# shellcheck disable=SC2086
"$G" $TF --steps 12 --run-dir "$d/tfr" --resume >"$d/out" 2>&1
test "$(losses "$d/tf" | wc -l)" -eq 12
test "$(losses "$d/tf")" = "$(losses "$d/tfr")"
# --max-tokens: token batches (every step within the budget), the same losses when cut and
# resumed across epochs, and an example longer than the budget is a clear error
# shellcheck disable=SC2086
"$G" $TF --steps 24 --max-tokens 120 --run-dir "$d/tk" >"$d/out" 2>&1
grep -q "steps of <= 120 tokens" "$d/out"
# shellcheck disable=SC2086
"$G" $TF --steps 10 --max-tokens 120 --run-dir "$d/tkr" >"$d/out" 2>&1
# shellcheck disable=SC2086
"$G" $TF --steps 24 --max-tokens 120 --run-dir "$d/tkr" --resume >"$d/out" 2>&1
test "$(losses "$d/tk")" = "$(losses "$d/tkr")"
test "$(losses "$d/tk" | head -n 12)" != "$(losses "$d/tf")"
grep -q '"max-tokens": 120' "$d/tk/config.json"
"$G" train seq2seq --task copy --steps 3 --eval-every 0 --hidden 16 --embed 8 --train-size 100 \
  --valid-size 10 --test-size 10 --max-tokens 200 --run-dir "$d/s2s-tk" >"$d/out" 2>&1
grep -q "batch <= 200 tokens" "$d/out"
if "$G" $TF --steps 2 --max-tokens 3 --run-dir "$d/tk3" >"$d/out" 2>&1; then
  echo "--max-tokens 3 accepted examples longer than 3 tokens" >&2; exit 1
fi
grep -q "more than --max-tokens 3" "$d/out"
# --task tsv: validation pairs held out of training unless --tsv-valid gives them; --tokenizer
# on both commands
i=0; : >"$d/p.tsv"
while [ $i -lt 40 ]; do printf 'w%s x%s\ty%s z%s\n' $i $i $i $i >>"$d/p.tsv"; i=$((i+1)); done
S2T="train seq2seq --task tsv --tsv-train $d/p.tsv --tsv-test $d/p.tsv --test-size 5 --steps 2 --eval-every 0 --hidden 16 --embed 8"
# shellcheck disable=SC2086
"$G" $S2T --valid-size 10 --run-dir "$d/tsv1" >"$d/out" 2>&1
grep -q "validation: the last 10 pairs of $d/p.tsv, held out of training" "$d/out"
grep -q "task tsv: 30 train / 10 valid / 5 test pairs" "$d/out"
# shellcheck disable=SC2086
"$G" $S2T --valid-size 5 --tsv-valid "$d/p.tsv" --tokenizer char --run-dir "$d/tsv2" >"$d/out" 2>&1
grep -q "task tsv: 40 train / 5 valid / 5 test pairs, vocab .* (char-level)" "$d/out"
if grep -q "held out of training" "$d/out"; then echo "--tsv-valid given, yet held out" >&2; exit 1; fi
# shellcheck disable=SC2086
if "$G" $S2T --valid-size 40 --run-dir "$d/tsv3" >"$d/out" 2>&1; then
  echo "--valid-size 40 of 40 pairs accepted" >&2; exit 1
fi
grep -q "too few to hold out --valid-size 40" "$d/out"
"$G" train transformer --task tsv --tsv-train "$d/p.tsv" --tsv-test "$d/p.tsv" --valid-size 8 \
  --test-size 5 --steps 3 --d-model 16 --heads 2 --layers 1 --ffn 32 --tokenizer char \
  --checkpoint-every 1 --keep-checkpoints 3 --run-dir "$d/tsv4" >"$d/out" 2>&1
grep -q "task tsv: 32 train / 8 valid / 5 test pairs, vocab .* (char-level" "$d/out"
# average: the newest checkpoints into one model file that translate --model decodes with; the
# newest one alone is the final model; an existing output is refused, a missing model too
"$G" average --run-dir "$d/tsv4" --last 2 >"$d/avg.json"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); c=j["checkpoints"]
assert len(c) == 2 and "step-00000003" in c[0] and "step-00000002" in c[1], j' "$d/avg.json"
"$G" translate --run-dir "$d/tsv4" --model "$d/tsv4/model_avg2.safetensors" "w3 x3" >"$d/avg2.txt"
test "$(wc -l <"$d/avg2.txt")" -eq 1
"$G" average --run-dir "$d/tsv4" --last 1 >/dev/null
"$G" translate --run-dir "$d/tsv4" --model "$d/tsv4/model_avg1.safetensors" "w3 x3" "y1" >"$d/avg1.txt"
"$G" translate --run-dir "$d/tsv4" "w3 x3" "y1" >"$d/final.txt"
cmp "$d/avg1.txt" "$d/final.txt"
if "$G" average --run-dir "$d/tsv4" --last 2 >"$d/out" 2>&1; then echo "average replaced its output" >&2; exit 1; fi
grep -q "model_avg2.safetensors exists; hint: --overwrite" "$d/out"
if "$G" translate --run-dir "$d/tsv4" --model "$d/none.safetensors" "w3" >"$d/out" 2>&1; then
  echo "translate --model of a missing file passed" >&2; exit 1
fi
# --tokenizer sentencepiece: subword models saved in the run directory and used by translate
"$G" train transformer --task tsv --tsv-train "$d/p.tsv" --tsv-test "$d/p.tsv" --valid-size 8 \
  --test-size 5 --steps 2 --d-model 16 --heads 2 --layers 1 --ffn 32 --tokenizer sentencepiece \
  --vocab-size 30 --run-dir "$d/tsv5" >"$d/out" 2>&1
grep -q "(sentencepiece-level" "$d/out"
test -s "$d/tsv5/src_spm.model" && test -s "$d/tsv5/tgt_spm.model"
"$G" translate --run-dir "$d/tsv5" "w3 x3" >"$d/out" 2>&1
# translate --model decodes with that file: tsv5's model does not fit tsv4's vocabularies
if "$G" translate --run-dir "$d/tsv4" --model "$d/tsv5/model.safetensors" "w3" >"$d/out" 2>&1; then
  echo "translate --model: another run's model was not read" >&2; exit 1
fi
grep -q "tsv4/src_spm.model" "$d/out"
# bleu: the run's test hypotheses score as its results.json says; references equal to the
# hypotheses score 100; more hypotheses than references is an error
test "$(wc -l <"$d/tsv5/test_greedy.txt")" -eq 5
"$G" bleu "$d/tsv5/test_greedy.txt" "$d/p.tsv" >"$d/bleu.json"
python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); r=json.load(open(sys.argv[2]))
assert b["hypotheses"] == 5 and abs(b["bleu"] - r["test_bleu_greedy"]) < 1e-9, (b, r)' "$d/bleu.json" "$d/tsv5/results.json"
printf 'the cat sat on the mat\nA dog ran\n' >"$d/refs.txt"
"$G" bleu "$d/refs.txt" "$d/refs.txt" >"$d/out"
grep -q '"bleu":100.0' "$d/out"
# ... and against lowercased references "A dog ran" no longer matches itself
if grep -q '"bleu_lowercased_references":100.0' "$d/out"; then echo "bleu: lowercased references unchanged" >&2; exit 1; fi
# ... while case-insensitive BLEU (both sides lowercased) of an uppercased copy is 100 again
printf 'THE CAT SAT ON THE MAT\na DOG ran\n' >"$d/upper.txt"
"$G" bleu "$d/upper.txt" "$d/refs.txt" >"$d/out"
python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))
assert abs(b["bleu_case_insensitive"] - 100) < 1e-9 and b["bleu"] < 50, b' "$d/out"
if "$G" bleu "$d/refs.txt" "$d/tsv5/test_greedy.txt.none" >"$d/out" 2>&1; then echo "bleu of a missing file passed" >&2; exit 1; fi
head -n 1 "$d/refs.txt" >"$d/ref1.txt"
if "$G" bleu "$d/refs.txt" "$d/ref1.txt" >"$d/out" 2>&1; then echo "bleu with too few references passed" >&2; exit 1; fi
grep -q "has 2 hypotheses but .* has only 1 references" "$d/out"
# shellcheck disable=SC2086
"$G" $S2T --valid-size 5 --tokenizer sentencepiece --vocab-size 30 --run-dir "$d/tsv6" >"$d/out" 2>&1
grep -q "(sentencepiece-level)" "$d/out"
"$G" translate --run-dir "$d/tsv6" "w3 x3" >"$d/out" 2>&1
# plot: two runs in one image, by wall time; comparing without --out is a usage error
"$G" plot "$d/tsv1" "$d/tsv2" --labels one,two --x time --out "$d/cmp" >"$d/out" 2>&1
grep -q "wrote $d/cmp.png and $d/cmp.svg" "$d/out" && test -s "$d/cmp.png"
if "$G" plot "$d/tsv1" "$d/tsv2" >"$d/out" 2>&1; then echo "plot of two runs without --out passed" >&2; exit 1; fi
grep -q "comparing runs needs --out NAME" "$d/out"
# data prepare date: the split of --task date --seed N as TSV files that --task tsv reads
"$G" data prepare date --data-dir "$d/dd" --seed 3 >"$d/out" 2>&1
grep -q "20000 / 500 / 1000 date pairs (seed 3)" "$d/out"
[ "$(wc -l <"$d/dd/date/train.tsv")" -eq 20000 ] && [ "$(wc -l <"$d/dd/date/test.tsv")" -eq 1000 ]
# shellcheck disable=SC2086
"$G" train seq2seq --task tsv --tokenizer char --tsv-train "$d/dd/date/train.tsv" --tsv-valid "$d/dd/date/dev.tsv" \
  --tsv-test "$d/dd/date/test.tsv" --train-size 200 --test-size 20 --steps 2 --eval-every 0 --hidden 16 --embed 8 \
  --run-dir "$d/dd/run" >"$d/out" 2>&1
grep -q "task tsv: 200 train / 500 valid / 20 test pairs, vocab .* (char-level)" "$d/out"
grep -qx -- "-" "$d/dd/run/tgt_vocab.txt"  # the ISO target's dash is a token of its own
"$G" translate --run-dir "$d/tf" abc --beam 2 --head 1 --attention-png "$d/tfh.png" >"$d/out" 2>&1
grep -q "wrote" "$d/out"
test -s "$d/tfh.png"
# gpt on a TSV's source column, resumed the same way
i=0; : >"$d/c.tsv"
while [ $i -lt 60 ]; do printf 'k%s\tthe quick brown fox %s jumps\tel zorro %s\n' $i $i $i >>"$d/c.tsv"; i=$((i+1)); done
GP="train gpt --data $d/c.tsv --context 16 --d-model 16 --heads 2 --layers 1 --batch 4 --samples 1"
# shellcheck disable=SC2086
"$G" $GP --steps 8 --run-dir "$d/gp" >"$d/out" 2>&1
grep -q "validation perplexity" "$d/out"
# shellcheck disable=SC2086
"$G" $GP --steps 4 --run-dir "$d/gpr" >"$d/out" 2>&1
# shellcheck disable=SC2086
"$G" $GP --steps 8 --run-dir "$d/gpr" --resume >"$d/out" 2>&1
test "$(losses "$d/gp")" = "$(losses "$d/gpr")"
"$G" compile-info --dot "$d/step.dot" >"$d/out" 2>&1
grep -q "digraph" "$d/step.dot"
"$G" train mlp --compile --steps 30 >"$d/out" 2>&1

# Every train command: kill -9 at a random step after the first checkpoint, then --resume:
# nothing lost (steps, metrics, best model).
kill_and_resume "$d/kr-mlp" 100 train mlp --hidden 16 --eval-every 10
kill_and_resume "$d/kr-s2s" 100 train seq2seq --task copy --eval-every 20 --hidden 16 --embed 8 \
  --train-size 100 --valid-size 10 --test-size 10
kill_and_resume "$d/kr-tf" 100 train transformer --task reverse --d-model 16 --heads 2 --layers 1 \
  --ffn 32 --train-size 200 --valid-size 10 --test-size 10 --eval-every 20 --eval-size 10
kill_and_resume "$d/kr-gpt" 100 train gpt --context 16 --d-model 16 --heads 2 --layers 1 --batch 4 \
  --samples 1 --train-size 200 --valid-lines 20 --eval-every 20 --eval-windows 4
# Ctrl-C (SIGINT) during training: the step finishes, a checkpoint is saved, exit status 130
interrupt_run "$d/int-mlp" train mlp --hidden 16
interrupt_run "$d/int-s2s" train seq2seq --task copy --eval-every 0 --hidden 16 --embed 8 \
  --train-size 100 --valid-size 10 --test-size 10
# ... and during the test decoding after training (3000 pairs, seconds): it stops at the next
# batch with 130, after the model was saved and before results.json
"$G" train transformer --task reverse --d-model 16 --heads 2 --layers 1 --ffn 32 --train-size 200 \
  --test-size 3000 --steps 4 --run-dir "$d/int-tf" >"$d/int-tf.out" 2>&1 &
pid=$!
n=0
until [ -f "$d/int-tf/model.safetensors" ]; do
  kill -0 $pid 2>/dev/null || { echo "train transformer ended before its test decoding" >&2; exit 1; }
  n=$((n + 1)); [ $n -lt 6000 ] || { echo "train transformer: no model.safetensors after 60 s" >&2; exit 1; }
  sleep 0.01
done
kill -INT $pid
rc=0; wait $pid || rc=$?
if [ $rc -ne 130 ] || [ -f "$d/int-tf/results.json" ]; then
  echo "Ctrl-C during train transformer's test decoding: exit $rc, expected 130 before results.json" >&2
  cat "$d/int-tf.out" >&2; exit 1
fi

# --config: a run's own config.json is taken back as it is; a directory is a usage error
"$G" train mlp --config "$d/kr-mlp/config.json" --steps 3 --run-dir "$d/cfg" >"$d/out" 2>&1
grep -q '"hidden": 16' "$d/cfg/config.json"
rc=0; "$G" train mlp --config . >"$d/out" 2>&1 || rc=$?
if [ $rc -ne 2 ] || ! grep -q "is a directory" "$d/out"; then
  echo "train mlp --config .: exit $rc, expected 2 and a message" >&2; cat "$d/out" >&2; exit 1
fi
# a model too big for the machine is refused before anything is allocated, naming its size
rc=0; "$G" train mlp --hidden 100000 --run-dir "" >"$d/out" 2>&1 || rc=$?
if [ $rc -ne 1 ] || ! grep -q "GiB for weights, gradients and AdamW state" "$d/out"; then
  echo "train mlp --hidden 100000: exit $rc, expected 1 and the memory it needs" >&2; cat "$d/out" >&2; exit 1
fi
# every train command lists the common trainer flags
for x in mlp seq2seq transformer gpt bert-pretrain bert-finetune abcnn; do
  "$G" train $x --help >"$d/out" 2>&1
  for flag in --run-dir --resume --overwrite --config --steps --time-budget --checkpoint-every \
              --keep-checkpoints --eval-every --log-every --grad-accumulation --clip-grad-norm \
              --patience --seed --threads --device; do
    grep -q -- "$flag " "$d/out" || { echo "graft train $x --help does not list $flag" >&2; exit 1; }
  done
done

# BERT: pretrain a 1-layer model on a tiny corpus (vocabulary trained on it), then fine-tune it
# on a slice of the WordNet lexname task (when wordnet-base is installed).
for i in 1 2 3 4 5 6; do
  printf 'The cat sat on the mat number %s.\nA dog ran in the park.\nBirds sing in the morning.\n\n' "$i"
  printf 'Rivers flow to the sea.\nThe sun rises in the east again.\nStars shine at night.\n\n'
done >"$d/corpus.txt"
"$G" train bert-pretrain --corpus "$d/corpus.txt" --vocab-size 120 --hidden 16 --layers 1 \
  --heads 2 --ffn 32 --max-seq-len 24 --batch 4 --steps 4 --eval-every 2 --run-dir "$d/bp" >"$d/out" 2>"$d/err"
grep -q '"eval_mlm_accuracy"' "$d/out"
grep -q '"eval_nsp_accuracy"' "$d/bp/metrics.jsonl"
test -s "$d/bp/model.safetensors" && test -s "$d/bp/vocab.txt"
if [ -f /usr/share/wordnet/data.noun ]; then
  "$G" train bert-finetune --init "$d/bp" --train-size 64 --steps 3 --batch 8 --eval-every 3 \
    --eval-size 32 --test-size 32 --max-seq-len 24 --run-dir "$d/bf" >"$d/out" 2>"$d/err"
  grep -q '"encoder": "pretrained"' "$d/out"
  grep -q '"test_accuracy"' "$d/out"
fi

# --device opencl:0 when an OpenCL device is present (PoCL in CI): training steps on the device,
# decoding and saving on the CPU.
if "$G" devices 2>/dev/null | grep -q '^opencl:0 *available'; then
  "$G" train seq2seq --task reverse --steps 3 --eval-every 0 --hidden 16 --embed 8 --train-size 20 \
    --valid-size 2 --test-size 2 --device opencl:0 --run-dir "$d/s2s-ocl" >"$d/out" 2>&1
  test -s "$d/s2s-ocl/model.safetensors" && grep -q '"steps": 3,' "$d/s2s-ocl/results.json"
fi

for bad in "train seq2seq --attention nonsense" "train abcnn --variant 7" \
           "train seq2seq --max-minutes 1" "train transformer --target 0.5" "train mlp --lr nan" \
           "train seq2seq --eval-every 0 --target-exact 0.9" "train mlp --config $d/no-such.json" \
           "train gpt --batch 5 --grad-accumulation 2" "train mlp --patience 2 --eval-every 0" \
           "train mlp --resume --overwrite" "train transformer --resume" \
           "train transformer --steps 0" "train transformer --task nonsense" "train gpt --context 0" \
           "train transformer --init kaiming" \
           "compile-info --tile-bytes -1" \
           "train bert-pretrain --steps 0" "train bert-finetune --task nonsense"; do
  rc=0
  # shellcheck disable=SC2086
  "$G" $bad >/dev/null 2>&1 || rc=$?
  if [ "$rc" -ne 2 ]; then echo "graft $bad: exit $rc, expected 2" >&2; exit 1; fi
done
# mlp's cosine schedule spans --steps: resuming with other --steps is refused, naming it (the
# restored schedule would jump to another curve); the same --steps resumes
"$G" train mlp --steps 20 --run-dir "$d/sched" >"$d/out" 2>&1
rc=0; "$G" train mlp --steps 40 --run-dir "$d/sched" --resume >"$d/out" 2>&1 || rc=$?
test "$rc" -eq 1 && grep -q "steps: 20 -> 40" "$d/out"
"$G" train mlp --steps 20 --run-dir "$d/sched" --resume >"$d/out" 2>&1
# graft help lists every subcommand, and explains one
"$G" help >"$d/out"
for c in ops devices version help train plot compile-info translate data predict sample bleu average; do
  grep -Eq "^  $c " "$d/out" || { echo "graft help does not list $c" >&2; exit 1; }
done
"$G" help train seq2seq | grep -q -- "--time-budget"
rc=0; "$G" help nonsense >/dev/null 2>&1 || rc=$?
test "$rc" -eq 2
echo "cli smoke: ok"

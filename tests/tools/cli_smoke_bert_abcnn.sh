#!/bin/sh
# Smoke test of `graft train bert-pretrain`, `bert-finetune` and `abcnn` as long runs: a kill -9
# at a random step after the first checkpoint, then --resume, completes (with the same losses as
# an uninterrupted run); Ctrl-C (SIGINT) saves a checkpoint and exits 130; a refused run leaves
# the run directory untouched (vocab.txt byte for byte); a `"` in a path gives valid JSON.
# Tiny models, a few seconds per case. bert-finetune runs when wordnet-base is installed.
set -eu
G=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
export OMP_NUM_THREADS=1

fail() { echo "cli_smoke_bert_abcnn: $*" >&2; exit 1; }
# losses RUN_DIR: the training losses of RUN_DIR/metrics.jsonl, one per line, in step order.
losses() { sed -n 's/^{"step":[0-9]*,"loss":\([^,]*\),.*/\1/p' "$1/metrics.jsonl"; }
# steps RUN_DIR: the step numbers of those lines, on one line.
steps() { sed -n 's/^{"step":\([0-9]*\),"loss".*/\1/p' "$1/metrics.jsonl" | tr '\n' ' '; }
# run_rc CMD...: runs graft CMD... (output in $d/out, $d/err) and prints its exit status.
run_rc() { rc=0; "$G" "$@" >"$d/out" 2>"$d/err" || rc=$?; echo "$rc"; }

# start_and_wait RUN_DIR ARGS...: starts `graft ARGS... --run-dir RUN_DIR` in the background
# (pid in $pid, output in RUN_DIR.log) and returns once RUN_DIR/checkpoint.json exists.
start_and_wait() {
  run=$1; shift
  "$G" "$@" --run-dir "$run" >"$run.log" 2>&1 &
  pid=$!
  n=0
  while [ ! -f "$run/checkpoint.json" ]; do
    kill -0 "$pid" 2>/dev/null || { cat "$run.log" >&2; fail "$run ended before its first checkpoint"; }
    n=$((n + 1)); [ $n -lt 1200 ] || fail "$run: no checkpoint after 60 s"
    sleep 0.05
  done
}

# kill_resume RUN_DIR ARGS...: kill -9s `graft ARGS... --run-dir RUN_DIR` at a random step
# after its first checkpoint, then runs it again with --resume, which must exit 0 having
# logged every step once. ARGS must hold --steps N (N large enough that a run lasts a second or
# more) and --checkpoint-every.
kill_resume() {
  run=$1; shift
  start_and_wait "$run" "$@"
  sleep "0.$(($(od -An -N1 -tu1 /dev/urandom) % 4))"  # 0..0.3 s more: a random step
  kill -9 "$pid" 2>/dev/null || fail "$run finished before the kill; raise its --steps"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" -eq 137 ] || fail "$run: the killed run exited $rc, expected 137"
  rc=0; "$G" "$@" --run-dir "$run" --resume >"$run.out" 2>"$run.err" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$run.err" >&2; fail "$run: the resumed run exited $rc"; }
  grep -q "resumed from" "$run.err" || fail "$run: the second run did not resume"
}

# sigint RUN_DIR ARGS...: SIGINT after the first checkpoint must exit 130 and leave a
# checkpoint at the last logged step.
sigint() {
  run=$1; shift
  start_and_wait "$run" "$@"
  kill -INT "$pid"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" -eq 130 ] || { cat "$run.log" >&2; fail "$run: SIGINT gave exit status $rc, expected 130"; }
  last=$(steps "$run" | awk '{print $NF}')
  grep -q "\"step\": *${last}[,}]" "$run/checkpoint.json" || fail "$run: no checkpoint at step $last after SIGINT"
}

# json_ok FILE KEY VALUE: FILE holds one valid JSON object whose KEY is VALUE.
json_ok() {
  python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); sys.exit(j[sys.argv[2]] != sys.argv[3])' "$@" ||
    { cat "$1" >&2; fail "$1 is not valid JSON with $2 = $3"; }
}

# ------------------------------------------------------------------ bert-pretrain
for i in 1 2 3 4 5 6; do
  printf 'The cat sat on the mat number %s.\nA dog ran in the park.\nBirds sing in the morning.\n\n' "$i"
  printf 'Rivers flow to the sea.\nThe sun rises in the east again.\nStars shine at night.\n\n'
done >"$d/corpus.txt"
{ cat "$d/corpus.txt"; printf 'Zebras eat quartz crystals.\n\nOther words here.\n'; } >"$d/corpus2.txt"
BP="train bert-pretrain --vocab-size 120 --hidden 16 --layers 1 --heads 2 --ffn 32 --max-seq-len 24 --batch 4 --warmup 2"

# --export: the examples (train + held out = all), epoch orders covering steps x batch, and the
# initial weights as a complete HF directory that bert-finetune --init-hf loads; a non-empty
# export directory is refused before anything is written, and so is --export with --resume
# shellcheck disable=SC2086
"$G" $BP --corpus "$d/corpus.txt" --steps 6 --eval-every 3 --export "$d/bx" --run-dir "$d/bxr" >"$d/out" 2>"$d/err" ||
  { cat "$d/err" >&2; fail "bert-pretrain --export"; }
python3 - "$d/bx" "$d/err" <<'PY' || fail "bert-pretrain --export: inconsistent files"
import json, re, sys
d = sys.argv[1]
train = [json.loads(l) for l in open(f"{d}/train.jsonl")]
held = [json.loads(l) for l in open(f"{d}/eval.jsonl")]
epochs = [json.loads(l) for l in open(f"{d}/epochs.jsonl")]
s = json.load(open(f"{d}/settings.json"))
m = re.search(r"(\d+) training examples, (\d+) held out", open(sys.argv[2]).read())
assert m and (len(train), len(held)) == (int(m[1]), int(m[2])), (len(train), len(held), m)
assert all(sorted(e) == list(range(len(train))) for e in epochs)
assert len(epochs) * len(train) >= s["steps"] * s["batch"] > (len(epochs) - 1) * len(train)
for e in train + held:
    assert len(e["input_ids"]) == len(e["token_type_ids"]) <= 24 and e["next_sentence_label"] in (0, 1)
    assert e["masked"] and all(0 < p < len(e["input_ids"]) for p, _ in e["masked"])
assert (s["steps"], s["batch"], s["warmup"]) == (6, 4, 2)
PY
cmp -s "$d/bx/vocab.txt" "$d/bxr/vocab.txt" || fail "--export: another vocabulary than the run's"
if [ -f /usr/share/wordnet/data.noun ]; then
  "$G" train bert-finetune --init-hf "$d/bx/init" --train-size 64 --batch 8 --eval-size 16 --test-size 32 \
    --max-seq-len 24 --warmup 1 --steps 2 --run-dir "" >"$d/out" 2>"$d/err" ||
    { cat "$d/err" >&2; fail "bert-finetune --init-hf of an export's init/"; }
fi
cp "$d/bx/settings.json" "$d/settings.before"
# shellcheck disable=SC2086
rc=$(run_rc $BP --corpus "$d/corpus.txt" --steps 6 --export "$d/bx" --run-dir "$d/bxr2")
{ [ "$rc" -eq 1 ] && grep -q "is not an empty directory" "$d/err"; } || fail "--export into a used directory: exit $rc"
cmp -s "$d/settings.before" "$d/bx/settings.json" || fail "a refused --export rewrote settings.json"
# shellcheck disable=SC2086
rc=$(run_rc $BP --corpus "$d/corpus.txt" --steps 6 --export "$d/bx-new" --run-dir "$d/bxr" --resume)
{ [ "$rc" -eq 1 ] && grep -q "needs a fresh run" "$d/err"; } || fail "--export with --resume: exit $rc"

# a refused run leaves the run directory as it was (vocab.txt byte for byte), and it resumes
# shellcheck disable=SC2086
"$G" $BP --corpus "$d/corpus.txt" --steps 4 --eval-every 2 --run-dir "$d/bp" >"$d/out" 2>"$d/err"
cp "$d/bp/vocab.txt" "$d/vocab.before"
# shellcheck disable=SC2086
rc=$(run_rc $BP --corpus "$d/corpus2.txt" --steps 8 --run-dir "$d/bp")
{ [ "$rc" -eq 1 ] && grep -q "already holds a checkpoint" "$d/err"; } || fail "a run into a run with a checkpoint: exit $rc"
cmp -s "$d/vocab.before" "$d/bp/vocab.txt" || fail "a refused run (no --resume) rewrote vocab.txt"
# shellcheck disable=SC2086
rc=$(run_rc $BP --corpus "$d/corpus2.txt" --steps 8 --run-dir "$d/bp" --resume)
{ [ "$rc" -eq 1 ] && grep -q "corpus" "$d/err"; } || fail "--resume with another --corpus: exit $rc"
cmp -s "$d/vocab.before" "$d/bp/vocab.txt" || fail "a refused --resume (another --corpus) rewrote vocab.txt"
# (its schedule decays to --steps, so --steps must stay: the run's own config.json has it)
rc=$(run_rc train bert-pretrain --config "$d/bp/config.json" --run-dir "$d/bp" --resume)
[ "$rc" -eq 0 ] || { cat "$d/err" >&2; fail "--resume with the run's own config.json: exit $rc"; }
[ "$(steps "$d/bp")" = "1 2 3 4 " ] || fail "bert-pretrain resume: steps $(steps "$d/bp")"
rc=$(run_rc train bert-pretrain --config "$d/bp/config.json" --steps 8 --run-dir "$d/bp" --resume)
{ [ "$rc" -eq 1 ] && grep -q "steps" "$d/err"; } || fail "--resume with other --steps (decay schedule): exit $rc"
cmp -s "$d/vocab.before" "$d/bp/vocab.txt" || fail "--resume rewrote vocab.txt"

# a `"` in --corpus: valid config.json and a valid result line
cp "$d/corpus.txt" "$d/q\"uote.txt"
# shellcheck disable=SC2086
rc=$(run_rc $BP --corpus "$d/q\"uote.txt" --steps 3 --eval-every 0 --run-dir "$d/bpq")
[ "$rc" -eq 0 ] || { cat "$d/err" >&2; fail "--corpus with a '\"': exit $rc"; }
json_ok "$d/bpq/config.json" corpus "$d/q\"uote.txt"
tail -n 1 "$d/out" >"$d/line.json"
json_ok "$d/line.json" corpus "$d/q\"uote.txt"

# kill -9 at a random step, --resume: the same losses as an uninterrupted run
# shellcheck disable=SC2086
"$G" $BP --corpus "$d/corpus.txt" --steps 1500 --eval-every 500 --run-dir "$d/bp-full" >"$d/out" 2>&1
# shellcheck disable=SC2086
kill_resume "$d/bp-kill" $BP --corpus "$d/corpus.txt" --steps 1500 --eval-every 500 --checkpoint-every 2
[ "$(losses "$d/bp-kill")" = "$(losses "$d/bp-full")" ] || fail "bert-pretrain: kill -9 + resume changed the losses"
grep -q '"eval_mlm_accuracy"' "$d/bp-kill.out" || fail "bert-pretrain: no result line after resume"
# shellcheck disable=SC2086
sigint "$d/bp-int" $BP --corpus "$d/corpus.txt" --steps 100000 --eval-every 0 --checkpoint-every 2

# ------------------------------------------------------------------ bert-finetune
if [ -f /usr/share/wordnet/data.noun ]; then
  BF="train bert-finetune --init $d/bp --train-size 64 --batch 8 --eval-size 16 --test-size 32 --max-seq-len 24 --warmup 2"
  # shellcheck disable=SC2086
  "$G" $BF --steps 400 --eval-every 200 --run-dir "$d/bf-full" >"$d/out" 2>&1
  grep -q '"encoder": "pretrained"' "$d/out" || fail "bert-finetune: no result line"
  # shellcheck disable=SC2086
  kill_resume "$d/bf-kill" $BF --steps 400 --eval-every 200 --checkpoint-every 2
  [ "$(losses "$d/bf-kill")" = "$(losses "$d/bf-full")" ] || fail "bert-finetune: kill -9 + resume changed the losses"
  grep -q '"test_accuracy"' "$d/bf-kill.out" || fail "bert-finetune: no result line after resume"
  # shellcheck disable=SC2086
  sigint "$d/bf-int" $BF --steps 100000 --eval-every 0 --checkpoint-every 2
  # SIGINT during the final dev/test evaluation (all 23k glosses, seconds; checkpoint.json
  # appears when training ends) stops it: exit 130, no result line
  start_and_wait "$d/bf-eval" train bert-finetune --vocab "$d/bp/vocab.txt" --hidden 64 --layers 2 \
    --heads 2 --ffn 128 --train-size 64 --steps 2 --warmup 1 --batch 8 --max-seq-len 32
  sleep 0.2
  kill -INT "$pid"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" -eq 130 ] || { cat "$d/bf-eval.log" >&2; fail "SIGINT in the final evaluation: exit $rc, expected 130"; }
  if grep -q '"test_accuracy"' "$d/bf-eval.log"; then fail "SIGINT in the final evaluation: it ran to the end"; fi
fi

# ------------------------------------------------------------------ abcnn
AB="train abcnn --data synthetic --variant 3 --embed-dim 8 --channels 8 --batch 8 --eval-every 50"
# a run cut at step 6 and resumed logs the losses of an uninterrupted one, bit for bit
# shellcheck disable=SC2086
"$G" $AB --steps 12 --run-dir "$d/ab" >"$d/out" 2>&1
# shellcheck disable=SC2086
"$G" $AB --steps 6 --run-dir "$d/ab-cut" >"$d/out" 2>&1
# shellcheck disable=SC2086
"$G" $AB --steps 12 --run-dir "$d/ab-cut" --resume >"$d/out" 2>&1
[ "$(losses "$d/ab" | wc -l)" -eq 12 ] || fail "abcnn: $(losses "$d/ab" | wc -l) losses, expected 12"
[ "$(losses "$d/ab")" = "$(losses "$d/ab-cut")" ] || fail "abcnn: a cut and resumed run changed the losses"
{ "$G" plot "$d/ab" >"$d/out" 2>&1 && test -s "$d/ab/loss.png"; } || fail "abcnn: graft plot of its run failed"
# kill -9 at a random step, --resume: the same losses as an uninterrupted run
# shellcheck disable=SC2086
"$G" $AB --steps 300 --run-dir "$d/ab-full" >"$d/out" 2>&1
# shellcheck disable=SC2086
kill_resume "$d/ab-kill" $AB --steps 300 --checkpoint-every 2
[ "$(losses "$d/ab-kill")" = "$(losses "$d/ab-full")" ] || fail "abcnn: kill -9 + resume changed the losses"
tail -n 1 "$d/ab-kill.out" >"$d/line.json"
json_ok "$d/line.json" stop max_steps
# shellcheck disable=SC2086
sigint "$d/ab-int" $AB --steps 100000 --checkpoint-every 2
# a `"` in --run-dir: valid JSON results
# shellcheck disable=SC2086
rc=$(run_rc $AB --steps 2 --run-dir "$d/a\"b")
[ "$rc" -eq 0 ] || { cat "$d/err" >&2; fail "abcnn --run-dir with a '\"': exit $rc"; }
tail -n 1 "$d/out" >"$d/line.json"
json_ok "$d/line.json" run_dir "$d/a\"b"

# usage errors: exit 2 (the model size is --size now; --config takes a JSON file)
for bad in "train bert-pretrain --size nonsense" "train bert-pretrain --config $d/no-such.json" \
           "train bert-finetune --batch 6 --grad-accumulation 4" "train abcnn --steps 0" \
           "train abcnn --config $d"; do
  # shellcheck disable=SC2086
  rc=$(run_rc $bad)
  [ "$rc" -eq 2 ] || fail "graft $bad: exit $rc, expected 2"
done
echo "cli smoke bert/abcnn: ok"

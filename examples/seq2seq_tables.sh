#!/bin/sh
# Prints the markdown tables of docs/seq2seq.md from the results.json files that
# examples/seq2seq_results.sh wrote under OUT (parts that were not run are skipped). Needs jq.
#
#   examples/seq2seq_tables.sh out/s2s
set -eu
OUT=$1
pct() { jq -r "$1 * 1000 | round / 10" "$2"; }

if [ -d "$OUT/date" ]; then
  echo "| attention | steps to >= 99% valid | wall time to 99% | test exact match | stop |"
  echo "| --- | --- | --- | --- | --- |"
  for att in none bahdanau general local-p; do
    r=$OUT/date/$att/results.json
    [ -f "$r" ] || continue
    echo "| $att | $(jq -r .reached_target_step "$r") | $(jq -r '.reached_target_wall_s | round' "$r") s |" \
         "$(pct .test_exact "$r")% | $(jq -r .stop_reason "$r") after $(jq -r .steps "$r") steps |"
  done
  echo
fi

if [ -d "$OUT/hard" ]; then
  echo "| attention | steps | train wall | test exact match | test token accuracy |"
  echo "| --- | --- | --- | --- | --- |"
  for att in hard bahdanau; do
    r=$OUT/hard/$att/results.json
    [ -f "$r" ] || continue
    echo "| $att | $(jq -r .steps "$r") | $(jq -r '.train_wall_s | round' "$r") s |" \
         "$(pct .test_exact "$r")% | $(pct .test_token_accuracy "$r")% |"
  done
  echo
fi

if [ -d "$OUT/length" ]; then
  for task in reverse copy; do
    first=
    for r in "$OUT"/length/"$task"-*/results.json; do [ -f "$r" ] && first=$r && break; done
    [ -n "$first" ] || continue
    echo "$task: exact match / token accuracy (%) by source length"
    echo
    printf "| attention |"
    jq -r '.by_length[] | " \(.from)-\(.to) (n=\(.count)) |"' "$first" | tr -d '\n'
    echo " train wall |"
    printf "| --- |"
    jq -r '.by_length[] | " --- |"' "$first" | tr -d '\n'
    echo " --- |"
    for att in none bahdanau general local-p; do
      r=$OUT/length/$task-$att/results.json
      [ -f "$r" ] || continue
      printf "| %s |" "$att"
      jq -r '.by_length[] | " \(.exact * 1000 | round / 10) / \(.token_accuracy * 1000 | round / 10) |"' "$r" | tr -d '\n'
      echo " $(jq -r '.train_wall_s | round' "$r") s |"
    done
    echo
  done
fi

if [ -d "$OUT/bible" ]; then
  echo "| model | steps | train wall | test verses | test BLEU (beam 5) | test token accuracy |"
  echo "| --- | --- | --- | --- | --- | --- |"
  for r in "$OUT"/bible/*/results.json; do
    [ -f "$r" ] || continue
    echo "| $(basename "$(dirname "$r")") | $(jq -r .steps "$r") | $(jq -r '.train_wall_s | round' "$r") s |" \
         "$(jq -r .test_examples "$r") | $(jq -r '.test_bleu * 100 | round / 100' "$r") | $(pct .test_token_accuracy "$r")% |"
  done
  echo
fi

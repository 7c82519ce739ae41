#!/usr/bin/env bash
# Every figure of docs/walkthrough.md, from the trained Multi30k model and its training run.
#
#   scripts/make_figures.sh MODEL_DIR RUN_DIR [OUT_DIR]
#
# MODEL_DIR: a model directory (config.json, model.safetensors, tokenizer.model), e.g. runs/m30k/checkpoint-best
# RUN_DIR:   the training run directory holding metrics.jsonl
# OUT_DIR:   where the PNG and SVG files go (default: docs/figures)
# Our BLEU comes from docs/results.json (fill in its entries first). Takes about a minute on 2 CPU cores.
# The same inputs give byte-identical files, so re-running it only changes figures whose inputs changed.
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
MODEL_DIR=$(realpath "$1")
RUN_DIR=$(realpath "$2")
OUT_DIR=$(realpath -m "${3:-$(dirname "$0")/../docs/figures}")
cd "$(dirname "$0")/.."
AIAYN=${AIAYN:-.venv/bin/aiayn}

# Two sentences of Multi30k test2016 (test2016.en lines 1 and 7; the translations are the model's own).
SENTENCE_1="A man in an orange hat starring at something."
SENTENCE_2="A group of people standing in front of an igloo."
# The head of the zoom and three-panel figures (last layer): HEAD=4 is the clearest aligning head of the
# multi30k-tiny model in docs/; pick yours from the grid figures.
HEAD=${HEAD:-4}

"$AIAYN" visualize attention --model "$MODEL_DIR" --text "$SENTENCE_1" --head "$HEAD" --name attention_s1 --out "$OUT_DIR"
"$AIAYN" visualize attention --model "$MODEL_DIR" --text "$SENTENCE_2" --head "$HEAD" --name attention_s2 --out "$OUT_DIR"
# The reference translation of sentence 1 (test2016.de line 1), teacher forced, for comparison.
"$AIAYN" visualize attention --model "$MODEL_DIR" --text "$SENTENCE_1" --head "$HEAD" \
  --target "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt." --name attention_s1_reference --out "$OUT_DIR"
"$AIAYN" visualize positional --d-model 512 --positions 100 --out "$OUT_DIR"
"$AIAYN" visualize architecture --preset base --out "$OUT_DIR"
"$AIAYN" visualize architecture --model "$MODEL_DIR" --out "$OUT_DIR"
"$AIAYN" visualize curves --run "$RUN_DIR" --out "$OUT_DIR"
"$AIAYN" visualize results --results docs/results.json --out "$OUT_DIR"
echo "figures written to $OUT_DIR" >&2

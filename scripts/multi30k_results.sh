#!/usr/bin/env bash
# The numbers of docs/RESULTS.md, from a finished multi30k-tiny run:
#
#   [BEAM=4] [LAST=5] scripts/multi30k_results.sh [RUN_DIR]        (default runs/multi30k-tiny)
#
# Averages the last LAST checkpoints (6.1), then scores checkpoint-best and the average on test2016 En->De with
# beam BEAM, alpha 0.6, two ways: sacrebleu on raw cased text, and on Multi30k's lowercased tokenized tok/ version.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${1:-runs/multi30k-tiny}
BEAM=${BEAM:-4}
LAST=${LAST:-5}
AIAYN=${AIAYN:-.venv/bin/aiayn}
DATA=$(.venv/bin/python -c 'from aiayn.data import resolve_data_dir; print(resolve_data_dir())')/multi30k
"$AIAYN" average --run "$RUN" --last "$LAST" --out "$RUN/averaged" --force
for MODEL in "$RUN/checkpoint-best" "$RUN/averaged"; do
  echo "== $MODEL: raw cased detokenized text"
  "$AIAYN" evaluate --model "$MODEL" --src "$DATA/test2016.en" --ref "$DATA/test2016.de" --beam "$BEAM" --quiet \
    --hyp-out "$MODEL/test2016.hyp.de"
  echo "== $MODEL: lowercased, Moses-tokenized (Multi30k tok/)"
  "$AIAYN" evaluate --model "$MODEL" --src "$DATA/test2016.en" --ref "$DATA/tok/test2016.lc.norm.tok.de" \
    --beam "$BEAM" --quiet --moses-lc-tok de
done

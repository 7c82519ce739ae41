#!/usr/bin/env bash
# The numbers of docs/RESULTS.md for models trained side by side by scripts/multi30k_ensemble_hour.sh:
#
#   [BEAM=5] [LAST=10] [PRECISION=float32] [ROWS="members arithmetic alpha"] \
#       scripts/multi30k_ensemble_results.sh RUN_DIR RUN_DIR [RUN_DIR ...]
#
# Averages each run's last LAST checkpoints (6.1) into RUN_DIR/averaged, then scores, for each word of ROWS:
#   members     each average alone with Wu et al.'s decoding (beam BEAM, fairseq's length normalisation log P / |Y|)
#   arithmetic  the ensemble of the averages (the mean of their next-token probabilities, `aiayn evaluate --model
#               A B ...`), log P / |Y|
#   geometric   the same with their renormalised geometric mean (`--ensemble-mean geometric`), log P / |Y|
#   alpha       the arithmetic ensemble with alpha 0.6
# each on test2016 two ways: lowercased tokenized (tok/, --tokenize none) and Moses-detokenized against the raw
# references (sacreBLEU 13a -lc, chrF). Hypotheses go to RUN_DIR/averaged/ and to the first RUN_DIR's ensemble*.de.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 RUN_DIR RUN_DIR [RUN_DIR ...]  (the members of the ensemble)" >&2; exit 2; }
BEAM=${BEAM:-5}
LAST=${LAST:-10}
PRECISION=${PRECISION:-float32}
ROWS=${ROWS:-members arithmetic alpha}
for ROW in $ROWS; do
  case $ROW in members | arithmetic | geometric | alpha) ;; *)
    echo "$0: ROWS takes members, arithmetic, geometric and alpha, not '$ROW'" >&2; exit 2 ;;
  esac
done
has_row() { [[ " $ROWS " == *" $1 "* ]]; }
. scripts/multi30k_tok_common.sh
AVERAGES=()
for RUN in "$@"; do
  [ -d "$RUN" ] || { echo "$0: no run directory $RUN" >&2; exit 2; }
  "$AIAYN" average --run "$RUN" --last "$LAST" --out "$RUN/averaged" --force
  AVERAGES+=("$RUN/averaged")
done
OUT=$1
i=0
has_row members && for MODEL in "${AVERAGES[@]}"; do
  i=$((i + 1))
  echo "== $OUT/member$i-power1: lowercased tokenized (tok/), $MODEL alone, beam $BEAM, log P / |Y|, precision $PRECISION"
  evaluate_tok "$MODEL" test2016 --lenpen-form power --lenpen 1.0 --hyp-out "$MODEL/test2016.power1.hyp.tok.de"
  echo "== $OUT/member$i-power1: raw references, Moses-detokenized hypotheses, sacreBLEU 13a case-insensitive"
  score2 "$MODEL/test2016.power1.hyp.tok.de" "$MODEL/test2016.power1.hyp.detok.de"
done
if has_row arithmetic; then
  echo "== $OUT/ensemble-power1: lowercased tokenized (tok/), ${AVERAGES[*]}, beam $BEAM, log P / |Y|, precision $PRECISION"
  evaluate_tok "${AVERAGES[*]}" test2016 --lenpen-form power --lenpen 1.0 --hyp-out "$OUT/ensemble.power1.hyp.tok.de"
  echo "== $OUT/ensemble-power1: raw references, Moses-detokenized hypotheses, sacreBLEU 13a case-insensitive"
  score2 "$OUT/ensemble.power1.hyp.tok.de" "$OUT/ensemble.power1.hyp.detok.de"
fi
if has_row geometric; then
  echo "== $OUT/ensemble-geometric-power1: lowercased tokenized (tok/), ${AVERAGES[*]}, beam $BEAM, geometric mean, log P / |Y|, precision $PRECISION"
  evaluate_tok "${AVERAGES[*]}" test2016 --ensemble-mean geometric --lenpen-form power --lenpen 1.0 \
    --hyp-out "$OUT/ensemble-geometric.power1.hyp.tok.de"
  echo "== $OUT/ensemble-geometric-power1: raw references, Moses-detokenized hypotheses, sacreBLEU 13a case-insensitive"
  score2 "$OUT/ensemble-geometric.power1.hyp.tok.de" "$OUT/ensemble-geometric.power1.hyp.detok.de"
fi
if has_row alpha; then
  echo "== $OUT/ensemble: lowercased tokenized (tok/), ${AVERAGES[*]}, beam $BEAM, alpha 0.6, precision $PRECISION"
  evaluate_tok "${AVERAGES[*]}" test2016 --hyp-out "$OUT/ensemble.hyp.tok.de"
  echo "== $OUT/ensemble: raw references, Moses-detokenized hypotheses, sacreBLEU 13a case-insensitive"
  score2 "$OUT/ensemble.hyp.tok.de" "$OUT/ensemble.hyp.detok.de"
fi

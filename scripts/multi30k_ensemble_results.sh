#!/usr/bin/env bash
# The numbers of docs/RESULTS.md for models trained side by side by scripts/multi30k_ensemble_hour.sh:
#
#   [BEAM=5] [LAST=10] [PRECISION=float32] scripts/multi30k_ensemble_results.sh RUN_DIR RUN_DIR [RUN_DIR ...]
#
# Averages each run's last LAST checkpoints (6.1) into RUN_DIR/averaged, scores each average alone with Wu et al.'s
# decoding (beam BEAM, fairseq's length normalisation log P / |Y|), then the ensemble of the averages (the mean of
# their next-token probabilities, `aiayn evaluate --model A B ...`) with log P / |Y| and with alpha 0.6, each on
# test2016 two ways: lowercased tokenized (tok/, --tokenize none) and Moses-detokenized against the raw references
# (sacreBLEU 13a -lc, chrF). Hypotheses go to RUN_DIR/averaged/ and to the first RUN_DIR's ensemble-*.de files.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 RUN_DIR RUN_DIR [RUN_DIR ...]  (the members of the ensemble)" >&2; exit 2; }
BEAM=${BEAM:-5}
LAST=${LAST:-10}
PRECISION=${PRECISION:-float32}
. scripts/multi30k_tok_common.sh
AVERAGES=()
for RUN in "$@"; do
  [ -d "$RUN" ] || { echo "$0: no run directory $RUN" >&2; exit 2; }
  "$AIAYN" average --run "$RUN" --last "$LAST" --out "$RUN/averaged" --force
  AVERAGES+=("$RUN/averaged")
done
OUT=$1
i=0
for MODEL in "${AVERAGES[@]}"; do
  i=$((i + 1))
  echo "== $OUT/member$i-power1: lowercased tokenized (tok/), $MODEL alone, beam $BEAM, log P / |Y|, precision $PRECISION"
  evaluate_tok "$MODEL" test2016 --lenpen-form power --lenpen 1.0 --hyp-out "$MODEL/test2016.power1.hyp.tok.de"
  echo "== $OUT/member$i-power1: raw references, Moses-detokenized hypotheses, sacreBLEU 13a case-insensitive"
  score2 "$MODEL/test2016.power1.hyp.tok.de" "$MODEL/test2016.power1.hyp.detok.de"
done
echo "== $OUT/ensemble-power1: lowercased tokenized (tok/), ${AVERAGES[*]}, beam $BEAM, log P / |Y|, precision $PRECISION"
evaluate_tok "${AVERAGES[*]}" test2016 --lenpen-form power --lenpen 1.0 --hyp-out "$OUT/ensemble.power1.hyp.tok.de"
echo "== $OUT/ensemble-power1: raw references, Moses-detokenized hypotheses, sacreBLEU 13a case-insensitive"
score2 "$OUT/ensemble.power1.hyp.tok.de" "$OUT/ensemble.power1.hyp.detok.de"
echo "== $OUT/ensemble: lowercased tokenized (tok/), ${AVERAGES[*]}, beam $BEAM, alpha 0.6, precision $PRECISION"
evaluate_tok "${AVERAGES[*]}" test2016 --hyp-out "$OUT/ensemble.hyp.tok.de"
echo "== $OUT/ensemble: raw references, Moses-detokenized hypotheses, sacreBLEU 13a case-insensitive"
score2 "$OUT/ensemble.hyp.tok.de" "$OUT/ensemble.hyp.detok.de"

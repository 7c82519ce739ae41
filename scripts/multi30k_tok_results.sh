#!/usr/bin/env bash
# The numbers of docs/RESULTS.md for a model trained on Multi30k's lowercased tokenized tok/ files
# (configs/multi30k-wu-tok.yaml), as Wu et al. 2021 and the multimodal MT papers train and score:
#
#   [BEAM=5] [LAST=10] [PRECISION=float32] [POWER1=1] [LENPENS="0.6 1.0 1.5 2.0"] scripts/multi30k_tok_results.sh [RUN_DIR]
#   (default runs/multi30k-wu-tok)
#
# Averages the last LAST checkpoints (6.1), then translates tok/test2016.lc.norm.tok.en with checkpoint-best and
# the average (beam BEAM, alpha 0.6) and scores two ways: BLEU against tok/test2016.lc.norm.tok.de with
# --tokenize none (the papers' "lowercased tokenized" BLEU), and, Moses-detokenized, with sacreBLEU's default 13a
# against the raw test2016.de references case-insensitively (-lc; a lowercasing model has no cased score).
# Unless POWER1=0, it also scores both models with Wu et al.'s decoding: fairseq's length normalisation, log P / |Y|.
# With LENPENS, it then chooses the model (checkpoint-best or the average) and length penalty with the best BLEU on
# tok/val (beam BEAM) and scores that choice on test2016 both ways.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${1:-runs/multi30k-wu-tok}
BEAM=${BEAM:-5}
LAST=${LAST:-10}
PRECISION=${PRECISION:-float32}
LENPENS=${LENPENS:-}
POWER1=${POWER1:-1}
. scripts/multi30k_tok_common.sh
"$AIAYN" average --run "$RUN" --last "$LAST" --out "$RUN/averaged" --force
for MODEL in "$RUN/checkpoint-best" "$RUN/averaged"; do
  echo "== $MODEL: lowercased tokenized (tok/), beam $BEAM, precision $PRECISION"
  evaluate_tok "$MODEL" test2016 --hyp-out "$MODEL/test2016.hyp.tok.de"
  echo "== $MODEL: raw references, Moses-detokenized hypotheses, sacreBLEU 13a case-insensitive"
  score2 "$MODEL/test2016.hyp.tok.de" "$MODEL/test2016.hyp.detok.de"
done
# Wu et al. 2021's own decoding of their 41.02 (fairseq generate's default length normalisation: log P / |Y|,
# our --lenpen-form power --lenpen 1.0), fixed in advance like alpha 0.6, on the same two models.
if [ "$POWER1" = 1 ]; then
  for MODEL in "$RUN/checkpoint-best" "$RUN/averaged"; do
    echo "== $MODEL-power1: lowercased tokenized (tok/), beam $BEAM, lenpen power 1.0 (fairseq's), precision $PRECISION"
    evaluate_tok "$MODEL" test2016 --lenpen-form power --lenpen 1.0 --hyp-out "$MODEL/test2016.power1.hyp.tok.de"
    echo "== $MODEL-power1: raw references, Moses-detokenized hypotheses, sacreBLEU 13a case-insensitive"
    score2 "$MODEL/test2016.power1.hyp.tok.de" "$MODEL/test2016.power1.hyp.detok.de"
  done
fi

[ -z "$LENPENS" ] && exit 0
echo
echo "# length penalty chosen on val (tok/val.lc.norm.tok, beam $BEAM, precision $PRECISION):"
BEST="" BEST_BLEU=-1
for MODEL in "$RUN/checkpoint-best" "$RUN/averaged"; do
  for LP in $LENPENS; do
    echo "-- val $(basename "$MODEL") lenpen $LP"
    OUT=$(evaluate_tok "$MODEL" val --lenpen "$LP" | grep -E '^(BLEU|chrF)')
    echo "$OUT"
    B=$(echo "$OUT" | sed -n 's/^BLEU = \([0-9.]*\).*/\1/p')
    if "$PY" -c "import sys; sys.exit(not float('$B') > float('$BEST_BLEU'))"; then BEST="$MODEL $LP" BEST_BLEU=$B; fi
  done
done
read -r MODEL LP <<< "$BEST"
echo
echo "# test2016 with the val-best choice:"
echo "== $RUN/val-best: lowercased tokenized (tok/), $(basename "$MODEL") lenpen $LP, beam $BEAM, precision $PRECISION"
evaluate_tok "$MODEL" test2016 --lenpen "$LP" --hyp-out "$RUN/val-best.hyp.tok.de"
echo "== $RUN/val-best: raw references, Moses-detokenized hypotheses, sacreBLEU 13a case-insensitive"
score2 "$RUN/val-best.hyp.tok.de" "$RUN/val-best.hyp.detok.de"

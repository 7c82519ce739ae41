# Shared by scripts/multi30k_tok_results.sh and scripts/multi30k_ensemble_results.sh (sourced, not run): the
# data directory, and the two ways test2016 is scored (lowercased tokenized tok/ files; Moses-detokenized against
# the raw references with sacreBLEU 13a -lc and chrF). Reads BEAM and PRECISION.
AIAYN=${AIAYN:-.venv/bin/aiayn}
PY=${PY:-.venv/bin/python}
"$PY" -c 'import sacremoses' 2>/dev/null || {
  echo "$0: sacremoses is missing (the raw-reference scores detokenize with it): $PY -m pip install -e '.[moses]'" >&2
  exit 1
}
DATA=$("$PY" -c 'from aiayn.data import resolve_data_dir; print(resolve_data_dir())')/multi30k
# score2 HYP_TOK OUT_DETOK: Moses-detokenize, then sacreBLEU 13a -lc and chrF against the raw references
score2() {
  "$PY" - "$1" "$DATA/test2016.de" "$2" <<'PY'
import sys
import sacrebleu
from sacremoses import MosesDetokenizer
hyp_tok, ref_path, out = sys.argv[1:4]
detok = MosesDetokenizer("de")
hyp = [detok.detokenize(line.split()) for line in open(hyp_tok, encoding="utf-8").read().splitlines()]
ref = open(ref_path, encoding="utf-8").read().splitlines()
open(out, "w", encoding="utf-8").write("\n".join(hyp) + "\n")
bleu = sacrebleu.metrics.BLEU(lowercase=True)
chrf = sacrebleu.metrics.CHRF(lowercase=True)
print(bleu.corpus_score(hyp, [ref]))
print("  signature:", bleu.get_signature())
print(chrf.corpus_score(hyp, [ref]))
print("  signature:", chrf.get_signature())
PY
}
# evaluate_tok "MODEL [MODEL...]" SPLIT [evaluate options]: BLEU and chrF on tok/SPLIT with --tokenize none, beam BEAM
evaluate_tok() {
  local models split=$2
  read -r -a models <<< "$1"  # one model directory, or several (space-separated): an ensemble
  shift 2
  "$AIAYN" evaluate --model "${models[@]}" --src "$DATA/tok/$split.lc.norm.tok.en" --ref "$DATA/tok/$split.lc.norm.tok.de" \
    --tokenize none --beam "$BEAM" --precision "$PRECISION" --quiet "$@"
}

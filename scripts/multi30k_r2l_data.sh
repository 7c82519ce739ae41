#!/usr/bin/env bash
# The data of a right-to-left English-German model (docs/RESULTS.md, "A second direction instead of a second seed"):
#
#   [AIAYN_DATA_DIR=...] scripts/multi30k_r2l_data.sh [OUT]        (default OUT: runs/data-r2l)
#
# writes OUT/multi30k/tok/{train,val,test2016}.lc.norm.tok.de with each line's words in reverse order and links the
# English files beside them; train on it with AIAYN_DATA_DIR=OUT and a data.dir of its own, e.g.
#   AIAYN_DATA_DIR=$PWD/runs/data-r2l aiayn train configs/multi30k-wu-tok-b2k.yaml \
#       --set data.dir=data-bin/multi30k-tok-en-de-8k-r2l --set train.out_dir=runs/multi30k-wu-tok-b2k-r2l
# and rerank with it: aiayn translate --model L2R --rerank-with R2L --rerank-direction r2l.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/data-r2l}
PY=${PY:-.venv/bin/python}
SRC=$("$PY" -c 'from aiayn.data import resolve_data_dir; print(resolve_data_dir())')/multi30k/tok
[ -d "$SRC" ] || { echo "$0: no Multi30k tok/ directory at $SRC (set AIAYN_DATA_DIR)" >&2; exit 2; }
mkdir -p "$OUT/multi30k/tok"
for SPLIT in train val test2016; do
  ln -sfn "$SRC/$SPLIT.lc.norm.tok.en" "$OUT/multi30k/tok/$SPLIT.lc.norm.tok.en"
  tmp="$OUT/multi30k/tok/.$SPLIT.lc.norm.tok.de.tmp"
  awk '{ for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : ""); print "" }' "$SRC/$SPLIT.lc.norm.tok.de" > "$tmp"
  mv "$tmp" "$OUT/multi30k/tok/$SPLIT.lc.norm.tok.de"
done
echo "wrote $OUT/multi30k/tok (German words reversed; English linked)"

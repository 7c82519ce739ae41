#!/usr/bin/env bash
# One model per CPU core, trained side by side for the same hour, to be decoded as an ensemble
# (`aiayn translate --model A --model B ...`, issue 15):
#
#   [MEMBERS=N] scripts/multi30k_ensemble_hour.sh [CONFIG] [OUT_PREFIX] [-- extra `aiayn train` options]
#   (defaults: MEMBERS = the cores this process may use, CONFIG configs/multi30k-wu-tok-b2k.yaml,
#    OUT_PREFIX runs/multi30k-wu-tok-b2k-1t)
#
# Member i (1..N) is CONFIG with train.threads=1 and train.seed=i, written to OUT_PREFIX-s<i>, pinned to the i-th
# usable core where `taskset` exists. Each member keeps CONFIG's clock (train.max_minutes), so the N models take the
# wall time one would. Rerun the same command to resume every member from its last checkpoint. Each member's log
# is OUT_PREFIX-s<i>.log. Exits non-zero if any member failed (naming it).
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${1:-configs/multi30k-wu-tok-b2k.yaml}
PREFIX=${2:-runs/multi30k-wu-tok-b2k-1t}
shift $(($# < 2 ? $# : 2))
[ "${1:-}" = "--" ] && shift
AIAYN=${AIAYN:-.venv/bin/aiayn}
mapfile -t CORES < <(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)), sep="\n")')
MEMBERS=${MEMBERS:-${#CORES[@]}}
[ -f "$CONFIG" ] || { echo "$0: no config file $CONFIG" >&2; exit 2; }
[[ "$MEMBERS" =~ ^[1-9][0-9]*$ ]] || { echo "$0: MEMBERS must be a positive integer, not '$MEMBERS'" >&2; exit 2; }
mkdir -p "$(dirname "$PREFIX")"
pids=()
for ((i = 1; i <= MEMBERS; i++)); do
  pin=()
  if command -v taskset >/dev/null && [ "$MEMBERS" -le "${#CORES[@]}" ]; then
    pin=(taskset -c "${CORES[$((i - 1))]}")
  fi
  "${pin[@]}" "$AIAYN" train "$CONFIG" --set train.threads=1 --set train.seed="$i" \
    --set train.out_dir="$PREFIX-s$i" "$@" >>"$PREFIX-s$i.log" 2>&1 &
  pids+=($!)
  echo "member $i: pid $!, ${pin[*]:-unpinned}, log $PREFIX-s$i.log"
done
failed=0
for ((i = 1; i <= MEMBERS; i++)); do
  if ! wait "${pids[$((i - 1))]}"; then
    echo "$0: member $i ($PREFIX-s$i) failed; its log: $PREFIX-s$i.log" >&2
    failed=1
  fi
done
exit $failed

#!/usr/bin/env bash
# One model per CPU core, trained side by side for the same hour, to be decoded as an ensemble
# (`aiayn translate --model A B ...`, scored by scripts/multi30k_ensemble_results.sh; issue 15):
#
#   [MEMBERS=N] [FIRST_SEED=1] scripts/multi30k_ensemble_hour.sh [CONFIG] [OUT_PREFIX] [-- extra `aiayn train` options]
#   (defaults: MEMBERS = the cores this process may use, CONFIG configs/multi30k-wu-tok-b2k.yaml,
#    OUT_PREFIX runs/multi30k-wu-tok-b2k-1t)
#
# Member i (1..N) is CONFIG with train.threads=1 and train.seed=s (s = FIRST_SEED + i - 1), written to
# OUT_PREFIX-s<s> (log: OUT_PREFIX-s<s>.log), pinned to the i-th usable core where `taskset` exists. Each member
# keeps CONFIG's clock (train.max_minutes), so the N models take the wall time one would. Rerun the same command to resume every member from its last checkpoint. Exits non-zero if
# any member failed (naming it).
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${1:-configs/multi30k-wu-tok-b2k.yaml}
PREFIX=${2:-runs/multi30k-wu-tok-b2k-1t}
shift $(($# < 2 ? $# : 2))
[ "${1:-}" = "--" ] && shift
AIAYN=${AIAYN:-.venv/bin/aiayn}
mapfile -t CORES < <(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)), sep="\n")')
MEMBERS=${MEMBERS:-${#CORES[@]}}
FIRST_SEED=${FIRST_SEED:-1}
[ -f "$CONFIG" ] || { echo "$0: no config file $CONFIG" >&2; exit 2; }
[[ "$MEMBERS" =~ ^[1-9][0-9]*$ ]] || { echo "$0: MEMBERS must be a positive integer, not '$MEMBERS'" >&2; exit 2; }
[[ "$FIRST_SEED" =~ ^[0-9]+$ ]] || { echo "$0: FIRST_SEED must be a non-negative integer, not '$FIRST_SEED'" >&2; exit 2; }
mkdir -p "$(dirname "$PREFIX")"
pids=()
names=()
for ((i = 1; i <= MEMBERS; i++)); do
  seed=$((FIRST_SEED + i - 1))
  run="$PREFIX-s$seed"
  pin=()
  if command -v taskset >/dev/null && [ "$MEMBERS" -le "${#CORES[@]}" ]; then
    pin=(taskset -c "${CORES[$((i - 1))]}")
  fi
  "${pin[@]}" "$AIAYN" train "$CONFIG" --set train.threads=1 --set train.seed="$seed" \
    --set train.out_dir="$run" "$@" >>"$run.log" 2>&1 &
  pids+=($!)
  names+=("$run")
  echo "member $i (seed $seed): pid $!, ${pin[*]:-unpinned}, log $run.log"
done
failed=0
for ((i = 0; i < MEMBERS; i++)); do
  if ! wait "${pids[$i]}"; then
    echo "$0: member $((i + 1)) (${names[$i]}) failed; its log: ${names[$i]}.log" >&2
    failed=1
  fi
done
exit $failed

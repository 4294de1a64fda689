#!/bin/bash
# The red-team suite's wall time before/after a change, interleaved per backend, on one corpus both can run.
#
#   benchmarks/redteam_timing.sh OUT BEFORE CORPUS [BACKEND…]
#
# BEFORE is a worktree of the earlier code (e.g. `git worktree add /tmp/before 3e64e79`, the commit before the run
# model), run with PYTHONPATH=BEFORE; the after side is this code. CORPUS is a red-team corpus directory both
# understand (the earlier commit's probes/redteam: the later corpus adds floods the earlier code has no quota for).
# Per backend (default bwrap docker): before, then after, then (ROUNDS=2, the default) after and before again; each
# `cascade bench redteam`
# run's wall and CPU (children included) go to OUT/times.tsv, its rows and summary to OUT/<side>-<backend>-<round>/.
# benchmarks/redteam_timing.py OUT prints the ratios. EXTRA adds options to every run (e.g. "--case credential").
set -u
OUT=$1 BEFORE=$2 CORPUS=$3
shift 3
[ $# -gt 0 ] && BACKENDS=("$@") || BACKENDS=(bwrap docker)
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
mkdir -p "$OUT"
run() {  # side backend round
  local side=$1 backend=$2 round=$3 code=$HERE
  [ "$side" = before ] && code=$BEFORE
  local dir="$OUT/$side-$backend-$round"
  echo "$(date +%T) $side $backend $round load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/log.txt"
  (cd "$code" && PYTHONPATH="$code" /usr/bin/time -o "$dir.time" -f "%e %U %S" "$PY" -m cascade bench redteam \
    --corpus "$CORPUS" --backend "$backend" --jobs 2 --quiet ${EXTRA:-} --output "$dir" >> "$OUT/log.txt" 2>&1)
  # the last line: /usr/bin/time says "Command exited with non-zero status N" first when the suite missed a target
  echo "$side	$backend	$round	$(tail -1 "$dir.time")	$(cut -d' ' -f1 /proc/loadavg)" >> "$OUT/times.tsv"
}
for backend in "${BACKENDS[@]}"; do
  run before "$backend" 1; run after "$backend" 1
  if [ "${ROUNDS:-2}" -ge 2 ]; then run after "$backend" 2; run before "$backend" 2; fi
done
echo done >> "$OUT/log.txt"

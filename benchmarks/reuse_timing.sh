#!/bin/bash
# Interleaved before/after `cascade bench run`s of the same instances; each command's wall and CPU (children
# included) in OUT/times.tsv, summarised by benchmarks/reuse_timing.py (benchmarks/results/reuse.md).
#
#   benchmarks/reuse_timing.sh OUT ARM IDS_FILE BEFORE [SET…]
#
# BEFORE is a worktree of the code before reuse (run with PYTHONPATH=BEFORE), or `no-reuse`: this code with the
# result store and pristine checkouts off (benchmarks/data/no_reuse.yaml). The after side runs this code with an
# empty cache directory (OUT/cache) at the start. SETs (default: gold coder gpt4o claude gold-repeat) run in that order,
# before then after, except gold-repeat (after first): after-gold is every base's first review, the later sets repeat
# reviews. Data: $CASCADE_SWEBENCH_DIR (default ../shared/data/swebench), repositories: $CASCADE_REPOS_DIR.
set -u
OUT=$1 ARM=$2 IDS_FILE=$3 BEFORE=$4
shift 4
[ $# -gt 0 ] && SETS=("$@") || SETS=(gold coder gpt4o claude gold-repeat)
HERE=$(cd "$(dirname "$0")/.." && pwd)
D=${CASCADE_SWEBENCH_DIR:-$HERE/../shared/data/swebench}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
IDS=$(sed 's/^/--instance /' "$IDS_FILE" | tr '\n' ' ')
declare -A SET=(
  [gold]="--gold"
  [gold-repeat]="--gold"
  [coder]="--predictions $D/coder-lite/all_preds.jsonl --results $D/coder-lite/results.json --trajs $D/coder-lite/trajs"
  [gpt4o]="--predictions $D/moatless-gpt4o-lite/all_preds.jsonl --results $D/moatless-gpt4o-lite/results.json --trajs $D/moatless-gpt4o-lite/trajs"
  [claude]="--predictions $D/moatless-claude35-lite/all_preds.jsonl --results $D/moatless-claude35-lite/results.json --trajs $D/moatless-claude35-lite/trajs"
)
run() {  # side set
  local side=$1 name=$2 code=$HERE config=()
  if [ "$side" = before ]; then
    if [ "$BEFORE" = no-reuse ]; then config=(--config "$HERE/benchmarks/data/no_reuse.yaml"); else code=$BEFORE; fi
  fi
  echo "$(date +%T) $side $name load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/log.txt"
  (cd "$code" && env CASCADE_CACHE_DIR="$OUT/cache" PYTHONPATH="$code" /usr/bin/time -o "$OUT/$side-$name.time" \
    -f "%e %U %S" "$PY" -m cascade bench run --tasks "$D/lite.tasks.jsonl" ${SET[$name]} --arm "$ARM" --jobs 2 \
    --quiet $IDS "${config[@]}" --output "$OUT/$side-$name" --reports "$OUT/$side-$name/reports" >> "$OUT/log.txt" 2>&1)
  echo "$side	$name	$(tail -1 "$OUT/$side-$name.time")	$(cut -d' ' -f1 /proc/loadavg)" >> "$OUT/times.tsv"
}
for name in "${SETS[@]}"; do
  if [ "$name" = gold-repeat ]; then run after "$name"; run before "$name"; else run before "$name"; run after "$name"; fi
done
echo done >> "$OUT/log.txt"

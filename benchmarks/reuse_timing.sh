#!/bin/bash
# Interleaved before/after rules-only runs; each command's wall and CPU (children included) in times.tsv.
set -u
OUT=/tmp/h26-bench
D=/work/shared/data/swebench
PY=/root/.pyenv/versions/3.11.7/bin/python3
IDS=$(sed 's/^/--instance /' /tmp/h26-ids.txt | tr '\n' ' ')
declare -A SET=(
  [gold]="--gold"
  [coder]="--predictions $D/coder-lite/all_preds.jsonl --results $D/coder-lite/results.json --trajs $D/coder-lite/trajs"
  [gpt4o]="--predictions $D/moatless-gpt4o-lite/all_preds.jsonl --results $D/moatless-gpt4o-lite/results.json --trajs $D/moatless-gpt4o-lite/trajs"
  [claude]="--predictions $D/moatless-claude35-lite/all_preds.jsonl --results $D/moatless-claude35-lite/results.json --trajs $D/moatless-claude35-lite/trajs"
)
run() {  # side name set
  local side=$1 name=$2 set=$3 dir extra=""
  if [ "$side" = before ]; then dir=/work/wt-h26-before; else dir=/work/wt-h26; extra="--reports $OUT/$side-$name/reports"; fi
  cd $dir
  echo "$(date +%T) $side $name load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt
  env CASCADE_CACHE_DIR=$OUT/cache PYTHONPATH=$dir /usr/bin/time -o $OUT/$side-$name.time -f "%e %U %S" \
    $PY -m cascade bench run --tasks $D/lite.tasks.jsonl ${SET[$set]} --repos-dir /work/.mirror --arm rules-only \
    --jobs 2 --quiet $IDS --output $OUT/$side-$name $extra >> $OUT/log.txt 2>&1
  echo "$side	$name	$(cat $OUT/$side-$name.time)	$(cut -d' ' -f1 /proc/loadavg)" >> $OUT/times.tsv
}
for s in gold coder gpt4o claude; do
  run before $s $s
  run after $s $s
done
run after gold-repeat gold
run before gold-repeat gold
echo done >> $OUT/log.txt

#!/usr/bin/env bash
# Several fuzzer runs side by side, one per core, then one summary of all of them.
# Usage: bash tools/fuzz/parallel.sh CPP_RUNS TRITON_RUNS MINUTES FIRST_SEED OUT_DIR
# Run i of each target gets its own seed range (FIRST_SEED + i * 1000000) and folder under OUT_DIR;
# OUT_DIR/summary.txt lists every finding, OUT_DIR/totals.txt the program counts per target.
set -u
cpp_runs=$1; triton_runs=$2; minutes=$3; seed=$4; out=$5
mkdir -p "$out"
for i in $(seq 1 "$cpp_runs"); do
  python3 -m tools.fuzz --programs 1000000 --seed $((seed + i * 1000000)) --max-minutes "$minutes" \
    --nice 0 --shrink-calls 60 --out "$out/cpp$i" > "$out/cpp$i.log" 2>&1 &
done
for i in $(seq 1 "$triton_runs"); do
  python3 -m tools.fuzz --programs 1000000 --targets triton --seed $((seed + 500000 + i * 1000000)) \
    --max-minutes "$minutes" --nice 0 --shrink-calls 60 --out "$out/triton$i" > "$out/triton$i.log" 2>&1 &
done
wait
python3 -m tools.fuzz summarize "$out"/cpp* "$out"/triton* > "$out/summary.txt" 2>&1
python3 - "$out" > "$out/totals.txt" <<'PY'
import glob, json, sys
totals = {}
for path in glob.glob(f"{sys.argv[1]}/*/summary.json"):
    for target, stats in json.load(open(path))["targets"].items():
        entry = totals.setdefault(target, {"programs": 0, "failures": 0})
        entry["programs"] += stats["programs"]
        entry["failures"] += stats["failures"]
print(json.dumps(totals))
PY
cat "$out/totals.txt"

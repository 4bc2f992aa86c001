#!/bin/bash
# Train a recipe on a lent GPU machine within a fixed time: bench/models/veernet-scale04.pt was trained so
# (bench/README.md, 2026-11-28). Run from the repository root; every figure and the last checkpoint go to $OUT.
#
#   SCALE=0.4 DEADLINE=520 bash bench/lease_train.sh
#
# 1. A probe: two epochs of PROBE_LOGS logs (default 800) at SCALE; the time between its two checkpoints,
#    grown to the run's LOGS, is one epoch's estimate.
# 2. The run: CONFIG (default the bundled recipe) at SCALE, with the pixel budget grown with a log's pixels
#    (micro-batches keep their images) and as many epochs (3 to MAX_EPOCHS, default 12) as fit before DEADLINE seconds from the
#    start, less a margin. A stopped run leaves its last checkpoint in $OUT: a loop copies it there as it
#    is written. The loop's output goes nowhere and it is ended with the run, so that it holds no pipe
#    open (in the first lease it kept the call running to its limit after training had ended).
#
# Knobs: SCALE, DEADLINE, CONFIG, PROBE_LOGS, MAX_EPOCHS, LOGS (default the config's dataset_size), DEVICE (default
# cuda; cpu for the script's own check), PYTHON (default python3), WORKERS (default: by /dev/shm, at most
# CPUs - 2).
set -u
T0=$(date +%s)
SCALE=${SCALE:-0.4}
DEADLINE=${DEADLINE:-520}
CONFIG=${CONFIG:-veernet_core/assets/bundled-config.json}
PROBE_LOGS=${PROBE_LOGS:-800}
DEVICE=${DEVICE:-cuda}
MAX_EPOCHS=${MAX_EPOCHS:-12}
PY=${PYTHON:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the folder that receives the figures and the checkpoint}"

{ nvidia-smi -L 2>/dev/null; "$PY" -c 'import torch, numpy; print(torch.__version__, torch.backends.cudnn.version(), numpy.__version__)'
  nproc; df -B1 /dev/shm | tail -1; } > "$OUT/env.txt" 2>&1
SHM=$(df -B1 /dev/shm | tail -1 | awk '{print $2}')
BASE_SCALE=$("$PY" -c "import json; print(json.load(open('$CONFIG'))['data']['scale'])")
BASE_BUDGET=$("$PY" -c "import json; print(json.load(open('$CONFIG'))['pixel_budget'])")
LOGS=${LOGS:-$("$PY" -c "import json; print(json.load(open('$CONFIG'))['data']['dataset_size'])")}
BUDGET=$("$PY" -c "print(round($BASE_BUDGET * ($SCALE / $BASE_SCALE) ** 2))")
# Batches in flight (prefetch 2 per worker, 16 B a padded pixel) within a quarter of /dev/shm.
WORKERS=${WORKERS:-$("$PY" -c "import os; print(max(1, min(os.cpu_count() - 2, int(0.25 * $SHM // (2 * $BUDGET * 16)))))")}
echo "scale $SCALE budget $BUDGET workers $WORKERS logs $LOGS" | tee "$OUT/plan.txt"

config() {  # config LOGS EPOCHS KEEP -> $WORK/config-LOGS.json
    "$PY" - "$CONFIG" "$1" "$2" "$3" "$SCALE" "$BUDGET" "$WORKERS" "$DEVICE" "$WORK" <<'PY'
import json, sys
source, logs, epochs, keep, scale, budget, workers, device, work = sys.argv[1:]
c = json.load(open(source))
c["data"].update(scale=float(scale), dataset_size=int(logs))
c.update(epochs=int(epochs), keep_last=int(keep), pixel_budget=int(budget), num_workers=int(workers), device=device)
json.dump(c, open(f"{work}/config-{logs}.json", "w"))
PY
}

config "$PROBE_LOGS" 2 2
timeout 150 "$PY" -m veernet_core train --out "$WORK/probe" --config "$WORK/config-$PROBE_LOGS.json" > "$WORK/probe.log" 2>&1
FIRST=$(stat -c %Y "$WORK"/probe/epoch-0001-*.pt.json 2>/dev/null || echo 0)
SECOND=$(stat -c %Y "$WORK"/probe/epoch-0002-*.pt.json 2>/dev/null || echo 0)
EPOCHS=$("$PY" -c "
first, second, elapsed = $FIRST, $SECOND, $(date +%s) - $T0
epoch = max(1, second - first) * $LOGS / $PROBE_LOGS if first and second else 90
left = $DEADLINE - elapsed - 25
print(max(min(3, $MAX_EPOCHS), min($MAX_EPOCHS, int(left // epoch))))
print(f'epoch estimate {epoch:.0f} s, {left} s left', file=open('$OUT/plan.txt', 'a'))")
echo "epochs $EPOCHS" >> "$OUT/plan.txt"
cat "$OUT/plan.txt"

config "$LOGS" "$EPOCHS" 1
copy_latest() {
    latest=$(ls -t "$WORK"/run/epoch-*.pt 2>/dev/null | head -1)
    if [ -n "$latest" ]; then
        cp "$latest" "$OUT/model.pt.part" && mv "$OUT/model.pt.part" "$OUT/model.pt" && cp "$latest.json" "$OUT/model.json"
    fi
}
( while sleep 15; do copy_latest; done ) > /dev/null 2>&1 &
COPIER=$!
timeout $((DEADLINE - ($(date +%s) - T0))) "$PY" -m veernet_core train --out "$WORK/run" --config "$WORK/config-$LOGS.json" \
    > "$WORK/run.log" 2>&1
echo "train exit $?" >> "$OUT/plan.txt"
kill "$COPIER" 2>/dev/null
wait "$COPIER" 2>/dev/null
copy_latest
cp "$WORK/run/config.json" "$OUT/config.json" 2>/dev/null
tr '\r' '\n' < "$WORK/run.log" | grep -v "step/s" > "$OUT/run.log"
echo "total $(( $(date +%s) - T0 )) s" >> "$OUT/plan.txt"
tail -3 "$OUT/plan.txt"

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
# 3. With EVAL_LOGS (default 0: none), once training has ended: the trained model and the bundled one side by
#    side on EVAL_LOGS held-out logs (EVAL_SEED, default 424242) of both renderers, at EVAL_SCALE (default 1.0,
#    full resolution) through `bench/digitise_eval.py`, on the machine's cores (EVAL_JOBS, default CPUs - 1),
#    each run within EVAL_LIMIT seconds (default 240); every JSON line goes to $OUT/eval-MODEL-RENDERER.json
#    and a line of its figures to plan.txt, so a lease's one call both retrains and measures.
#
# Knobs: SCALE, DEADLINE, CONFIG, PROBE_LOGS, MAX_EPOCHS, LOGS (default the config's dataset_size), DEVICE (default
# cuda; cpu for the script's own check), PYTHON (default python3), WORKERS (default: by /dev/shm, at most
# CPUs - 2), EVAL_LOGS, EVAL_SEED, EVAL_SCALE, EVAL_JOBS, EVAL_LIMIT.
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
# The recipe's pixel budget grown with a log's pixels; its dataset size; and the loader workers whose batches in
# flight fit the share of /dev/shm that `veernet_core.train.loader_workers` allows (at most CPUs - 2), in one read.
read -r BUDGET RECIPE_LOGS AUTO_WORKERS < <("$PY" - "$CONFIG" "$SCALE" <<'PY'
import json, os, sys
from veernet_core.config import TrainConfig
from veernet_core.train import LOADER_BYTES_PER_PIXEL, SHM_SHARE, shared_memory_bytes
c, scale = json.load(open(sys.argv[1])), float(sys.argv[2])
budget = round(c["pixel_budget"] * (scale / c["data"]["scale"]) ** 2)
in_flight = TrainConfig.from_dict(c).prefetch_factor * budget * LOADER_BYTES_PER_PIXEL
shm = shared_memory_bytes()
workers = os.cpu_count() - 2 if shm is None else min(os.cpu_count() - 2, int(SHM_SHARE * shm // in_flight))
print(budget, c["data"]["dataset_size"], max(1, workers))
PY
)
LOGS=${LOGS:-$RECIPE_LOGS}
WORKERS=${WORKERS:-$AUTO_WORKERS}
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
echo "trained in $(( $(date +%s) - T0 )) s" >> "$OUT/plan.txt"

EVAL_LOGS=${EVAL_LOGS:-0}
if [ "$EVAL_LOGS" -gt 0 ] && [ -f "$OUT/model.pt" ]; then
    CPUS=$(nproc)
    EVAL_JOBS=${EVAL_JOBS:-$(( CPUS > 1 ? CPUS - 1 : 1 ))}
    for RENDERER in synth paper; do
        for MODEL in trained bundled; do
            CHECKPOINT=()
            [ "$MODEL" = trained ] && CHECKPOINT=(--checkpoint "$OUT/model.pt")
            RESULT="$OUT/eval-$MODEL-$RENDERER.json"
            timeout "${EVAL_LIMIT:-240}" "$PY" bench/digitise_eval.py --renderer "$RENDERER" --logs "$EVAL_LOGS" \
                --seed "${EVAL_SEED:-424242}" --scale "${EVAL_SCALE:-1.0}" --jobs "$EVAL_JOBS" "${CHECKPOINT[@]}" \
                > "$RESULT" 2>> "$WORK/eval.log"
            echo "eval $MODEL $RENDERER exit $?" >> "$OUT/plan.txt"
            "$PY" - "$RESULT" "$MODEL" "$RENDERER" >> "$OUT/plan.txt" 2>&1 <<'PY'
import json, sys
result, model, renderer = sys.argv[1:]
try:
    d = json.loads(open(result).read())
except ValueError:
    sys.exit(f"  {model} on {renderer}: no figures")
worst = max(d["by_position"].items(), key=lambda kv: kv[1]["mae_pct"] or 0.0)
print(f"  {model} on {renderer}: mean {d['mae_pct']} % (all samples {d['mae_pct_all']} %, identity-blind "
      f"{d['identity_blind_mae_pct']} %), worst position {worst[0]} {worst[1]['mae_pct']} %, wrong unflagged "
      f"{d['identity']['wrong_unflagged']}")
PY
        done
    done
    tail -c 4000 "$WORK/eval.log" > "$OUT/eval.log"
fi
echo "total $(( $(date +%s) - T0 )) s" >> "$OUT/plan.txt"
tail -12 "$OUT/plan.txt"

#!/usr/bin/env bash
# The main job on a fresh machine: install, build, then for the GRPO kernel
# (vocab-tiled, value-and-grad, bf16 logits, Qwen vocabulary) on a default
# shape: dump its HLO (text + binary proto), the static HBM report, run it on
# the host emulator, and compare it sharded 8 ways (batch and vocab) against
# the unsharded module.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
B="${TPUOFF_B:-8}" T="${TPUOFF_T:-128}" V="${TPUOFF_V:-151936}"
OUT="${TPUOFF_OUT:-$ROOT/build/main_job}"

bash tools/scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j"$(nproc)" tpuoff
TPUOFF="$ROOT/build/tools/tpuoff"
KERNEL=(--kernel=grpo_tiled --mode=fwd_bwd --batch="$B" --seq="$T" --vocab="$V"
        --logits-dtype=bf16)
mkdir -p "$OUT"

echo "== dump: $OUT/grpo_tiled.hlo and .pb"
"$TPUOFF" dump "${KERNEL[@]}" --format=text --out="$OUT/grpo_tiled.hlo"
"$TPUOFF" dump "${KERNEL[@]}" --format=proto --out="$OUT/grpo_tiled.pb"

echo "== memory (static, per device)"
"$TPUOFF" memory "${KERNEL[@]}" --top=5

echo "== run on the host emulator"
"$TPUOFF" run "$OUT/grpo_tiled.pb" --random-inputs --seed=0 \
    --outputs="$OUT/outputs" --trace="$OUT/trace.json"

for shard in batch vocab; do
  echo "== compare: $shard-sharded on 8 devices vs unsharded"
  "$TPUOFF" compare "${KERNEL[@]}" --mesh=8 --shard="$shard" --seed=0
done
echo "main job OK (outputs and Perfetto trace in $OUT)"

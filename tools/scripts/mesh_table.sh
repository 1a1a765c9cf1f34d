#!/usr/bin/env bash
# Prints the README's per-device HBM table for 2-D meshes from real `tpuoff
# memory` runs (fwd_bwd, bf16 logits, V=151936, T=4096): 1x8, 2x4, 8x1 on a
# v6e-8 and 16x16 on a v6e-256, with batch x vocab and seq x vocab shardings
# of grpo_tiled, grpo_reference (batch x seq) and grpo_fused_linear, and how
# long each `memory` call took (wall seconds of the whole process).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TPUOFF="${TPUOFF:-$ROOT/build/tools/tpuoff}"
V=151936
row() {  # label, then tpuoff memory flags
  local label="$1"; shift
  local json start end
  start=$(date +%s.%N)
  if ! json="$("$TPUOFF" memory --mode=fwd_bwd --logits-dtype=bf16 --vocab=$V --seq=4096 --json "$@" 2>&1)"; then
    printf '| %s | n/a: %s | | | |\n' "$label" "$(echo "$json" | head -n1)"
    return
  fi
  end=$(date +%s.%N)
  python3 - "$label" "$start" "$end" <<PY "$json"
import json, sys
label, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
d = json.loads(sys.argv[4])
g = max(d["groups"], key=lambda g: g["peak_bytes"])
gb = lambda b: f"{b/1e9:.2f} GB ({b/2**30:.2f} GiB)"
print(f"| {label} | {gb(g['peak_bytes'])} | {gb(g['tpu_peak_bytes'])} | "
      f"{'yes' if g['fits'] else 'NO'} | {end - start:.2f} s |")
PY
}
echo "| kernel, shape, mesh, sharding | peak per device (plain) | TPU-padded peak | fits 32 GiB | memory took |"
echo "|---|---|---|---|---|"
for mesh in 1x8 2x4 8x1; do
  row "grpo_tiled B=8, $mesh batch,vocab" --kernel=grpo_tiled --batch=8 --mesh=$mesh --shard=batch,vocab
done
for mesh in 1x8 2x4 8x1; do
  row "grpo_tiled B=1, $mesh seq,vocab" --kernel=grpo_tiled --batch=1 --mesh=$mesh --shard=seq,vocab
done
for mesh in 1x8 2x4 8x1; do
  row "grpo_reference B=8, $mesh batch,seq" --kernel=grpo_reference --batch=8 --mesh=$mesh --shard=batch,seq
done
for mesh in 1x8 2x4 8x1; do
  row "grpo_fused_linear B=1 H=1536, $mesh seq,vocab" --kernel=grpo_fused_linear --batch=1 --hidden=1536 --mesh=$mesh --shard=seq,vocab
done
row "grpo_tiled B=16, 16x16 batch,vocab" --kernel=grpo_tiled --batch=16 --mesh=16x16 --shard=batch,vocab
row "grpo_tiled B=1, 16x16 seq,vocab" --kernel=grpo_tiled --batch=1 --mesh=16x16 --shard=seq,vocab
row "grpo_reference B=16, 16x16 batch,seq" --kernel=grpo_reference --batch=16 --mesh=16x16 --shard=batch,seq
row "grpo_fused_linear B=16 H=1536, 16x16 batch,vocab" --kernel=grpo_fused_linear --batch=16 --hidden=1536 --mesh=16x16 --shard=batch,vocab

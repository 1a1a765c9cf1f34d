#!/usr/bin/env bash
# Prints the README's per-device HBM table from real `tpuoff memory` runs:
# grpo_reference vs grpo_tiled (fwd_bwd, bf16) at the seed shape, unsharded
# and 8-way batch/vocab sharded, plus the fused LM-head rows.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TPUOFF="${TPUOFF:-$ROOT/build/tools/tpuoff}"
V=151936
row() {  # label, then tpuoff memory flags
  local label="$1"; shift
  local json
  if ! json="$("$TPUOFF" memory --mode=fwd_bwd --logits-dtype=bf16 --vocab=$V --json "$@" 2>&1)"; then
    printf '| %s | n/a: %s | | |\n' "$label" "$(echo "$json" | head -n1)"
    return
  fi
  python3 - "$label" <<PY "$json"
import json, sys
label = sys.argv[1]
d = json.loads(sys.argv[2])
g = max(d["groups"], key=lambda g: g["peak_bytes"])
gb = lambda b: f"{b/1e9:.2f} GB ({b/2**30:.2f} GiB)"
print(f"| {label} | {gb(g['peak_bytes'])} | {gb(g['tpu_peak_bytes'])} | "
      f"{'yes' if g['fits'] else 'NO'} |")
PY
}
echo "| kernel, shape, sharding | peak per device (plain) | TPU-padded peak | fits 32 GiB |"
echo "|---|---|---|---|"
row "grpo_reference B=1 T=4096, 1 device" --kernel=grpo_reference --batch=1 --seq=4096
row "grpo_tiled B=1 T=4096, 1 device" --kernel=grpo_tiled --batch=1 --seq=4096
row "grpo_reference B=8 T=4096, 1 device" --kernel=grpo_reference --batch=8 --seq=4096
row "grpo_tiled B=8 T=4096, 1 device" --kernel=grpo_tiled --batch=8 --seq=4096
row "grpo_reference B=8 T=4096, 8-way batch" --kernel=grpo_reference --batch=8 --seq=4096 --mesh=8 --shard=batch
row "grpo_tiled B=8 T=4096, 8-way batch" --kernel=grpo_tiled --batch=8 --seq=4096 --mesh=8 --shard=batch
row "grpo_tiled B=8 T=4096, 8-way vocab" --kernel=grpo_tiled --batch=8 --seq=4096 --mesh=8 --shard=vocab
row "grpo_tiled B=1 T=4096, 8-way vocab" --kernel=grpo_tiled --batch=1 --seq=4096 --mesh=8 --shard=vocab
row "grpo_fused_linear B=1 T=4096 H=1536, 1 device" --kernel=grpo_fused_linear --batch=1 --seq=4096 --hidden=1536
row "grpo_fused_linear B=1 T=8192 H=4096, 1 device" --kernel=grpo_fused_linear --batch=1 --seq=8192 --hidden=4096
row "grpo_fused_linear B=1 T=4096 H=1536, 8-way vocab" --kernel=grpo_fused_linear --batch=1 --seq=4096 --hidden=1536 --mesh=8 --shard=vocab
row "grpo_fused_linear B=1 T=8192 H=4096, 8-way vocab" --kernel=grpo_fused_linear --batch=1 --seq=8192 --hidden=4096 --mesh=8 --shard=vocab

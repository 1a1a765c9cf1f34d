#!/usr/bin/env bash
# Prints the README's table of tpuoff's static HBM peak against XLA:TPU's
# (libtpu, compile-only for v6e:2x4, no TPU needed) for every kernel at the
# seed shapes, from real `tpuoff compile --json` runs. Needs a tpuoff built
# with the PJRT backend (tools/pjrt/setup_plugins.sh). Slow: the fused
# kernel's compile takes minutes at the seed shape.
#   TPUOFF=build/tools/tpuoff tools/scripts/xla_tpu_table.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TPUOFF="${TPUOFF:-$ROOT/build/tools/tpuoff}"
COMMON=(--vocab=151936 --logits-dtype=bf16 --target=tpu-v6e:2x4 --json)
row() {  # label, then tpuoff compile flags
  local label="$1"; shift
  local json
  if ! json="$("$TPUOFF" compile "${COMMON[@]}" "$@" 2>/dev/null)"; then
    printf '| %s | compile failed: %s | | | | | |\n' "$label" \
      "$("$TPUOFF" compile "${COMMON[@]}" "$@" 2>&1 | grep -v hugepage | tail -n1)"
    return
  fi
  python3 - "$label" "$json" <<'PY'
import json, sys
label, d = sys.argv[1], json.loads(sys.argv[2])
x, t = d["xla_tpu"], d["tpuoff"]
hbm = x["argument_bytes"] + x["output_bytes"] + x["temp_bytes"] - x["alias_bytes"]
mb = lambda b: f"{b / 1e6:,.1f} MB"
pct = lambda a, b: f"{100.0 * (a / b - 1):+.2f}%"
print(f"| {label} | {mb(t['peak_bytes'])} | {mb(t['tpu_peak_bytes'])} | {mb(hbm)} | "
      f"{mb(x['temp_bytes'])} | {mb(x['peak_bytes'])} | {pct(t['tpu_peak_bytes'], hbm)} | "
      f"{pct(t['tpu_peak_bytes'], x['peak_bytes'])} |")
PY
}
echo "| kernel (bf16), shape, sharding | tpuoff peak | tpuoff TPU-padded | XLA:TPU HBM | of which temp | XLA:TPU peak (HBM + VMEM) | tpuoff vs XLA HBM | tpuoff vs XLA peak |"
echo "|---|---|---|---|---|---|---|---|"
S1=(--batch=1 --seq=4096)
row "grpo_reference fwd_bwd B=1 T=4096" --kernel=grpo_reference --mode=fwd_bwd "${S1[@]}"
row "grpo_tiled fwd_bwd B=1 T=4096" --kernel=grpo_tiled --mode=fwd_bwd "${S1[@]}"
row "entropy_reference fwd B=1 T=4096" --kernel=entropy_reference "${S1[@]}"
row "entropy_tiled fwd B=1 T=4096" --kernel=entropy_tiled "${S1[@]}"
row "grpo_fused_linear fwd_bwd B=1 T=4096 H=1536" --kernel=grpo_fused_linear --mode=fwd_bwd "${S1[@]}" --hidden=1536
row "grpo_reference fwd_bwd B=8 T=4096, 8-way batch" --kernel=grpo_reference --mode=fwd_bwd --batch=8 --seq=4096 --mesh=8 --shard=batch
row "grpo_tiled fwd_bwd B=8 T=4096, 8-way batch" --kernel=grpo_tiled --mode=fwd_bwd --batch=8 --seq=4096 --mesh=8 --shard=batch
row "grpo_tiled fwd_bwd B=1 T=4096, 8-way vocab" --kernel=grpo_tiled --mode=fwd_bwd "${S1[@]}" --mesh=8 --shard=vocab
row "entropy_tiled fwd B=1 T=4096, 8-way vocab" --kernel=entropy_tiled "${S1[@]}" --mesh=8 --shard=vocab
row "grpo_fused_linear fwd_bwd B=1 T=4096 H=1536, 8-way vocab" --kernel=grpo_fused_linear --mode=fwd_bwd "${S1[@]}" --hidden=1536 --mesh=8 --shard=vocab

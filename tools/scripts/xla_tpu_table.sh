#!/usr/bin/env bash
# Prints the README's table of tpuoff's HBM figures against XLA:TPU's
# (libtpu, compile-only for v6e:2x4, no TPU needed) for every kernel at the
# seed shapes, 1-D and 2-D meshes, from real `tpuoff compile --json` runs:
# tpuoff's static peak (TPU-padded), its v6e model of XLA's HBM
# (hlo/analysis/v6e_memory_spaces.h: temporaries in VMEM while they fit), and
# XLA:TPU's HBM allocation and peak. Needs a tpuoff built with the PJRT
# backend (tools/pjrt/setup_plugins.sh). Slow: the fused kernel's compile
# takes minutes at the seed shape.
#   TPUOFF=build/tools/tpuoff tools/scripts/xla_tpu_table.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TPUOFF="${TPUOFF:-$ROOT/build/tools/tpuoff}"
COMMON=(--vocab=151936 --logits-dtype=bf16 --target=tpu-v6e:2x4 --json)
row() {  # label, then tpuoff compile flags
  local label="$1"; shift
  local json
  if ! json="$("$TPUOFF" compile "${COMMON[@]}" "$@" 2>/dev/null)"; then
    printf '| %s | compile failed: %s | | | | | | |\n' "$label" \
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
print(f"| {label} | {mb(t['tpu_peak_bytes'])} | {mb(t['v6e_hbm_bytes'])} "
      f"({mb(t['v6e_hbm_temp_bytes'])}) | {mb(hbm)} ({mb(x['temp_bytes'])}) | "
      f"{mb(x['peak_bytes'])} | {pct(t['v6e_hbm_bytes'], hbm)} | "
      f"{pct(t['tpu_peak_bytes'], hbm)} |")
PY
}
echo "| kernel (bf16), shape, sharding | tpuoff peak (TPU-padded) | tpuoff v6e HBM (of which temp) | XLA:TPU HBM (of which temp) | XLA:TPU peak (HBM + VMEM) | v6e model vs XLA HBM | tpuoff peak vs XLA HBM |"
echo "|---|---|---|---|---|---|---|"
S1=(--batch=1 --seq=4096)
S8=(--batch=8 --seq=4096)
F=(--kernel=grpo_fused_linear --mode=fwd_bwd --hidden=1536)
row "grpo_reference fwd_bwd B=1 T=4096" --kernel=grpo_reference --mode=fwd_bwd "${S1[@]}"
row "grpo_tiled fwd_bwd B=1 T=4096" --kernel=grpo_tiled --mode=fwd_bwd "${S1[@]}"
row "entropy_reference fwd B=1 T=4096" --kernel=entropy_reference "${S1[@]}"
row "entropy_tiled fwd B=1 T=4096" --kernel=entropy_tiled "${S1[@]}"
row "grpo_fused_linear fwd_bwd B=1 T=4096 H=1536" "${F[@]}" "${S1[@]}"
row "grpo_reference fwd_bwd B=8 T=4096, 8-way batch" --kernel=grpo_reference --mode=fwd_bwd "${S8[@]}" --mesh=8 --shard=batch
row "grpo_tiled fwd_bwd B=8 T=4096, 8-way batch" --kernel=grpo_tiled --mode=fwd_bwd "${S8[@]}" --mesh=8 --shard=batch
row "grpo_tiled fwd_bwd B=1 T=4096, 8-way vocab" --kernel=grpo_tiled --mode=fwd_bwd "${S1[@]}" --mesh=8 --shard=vocab
row "grpo_tiled fwd_bwd B=8 T=4096, 2x4 batch,vocab" --kernel=grpo_tiled --mode=fwd_bwd "${S8[@]}" --mesh=2x4 --shard=batch,vocab
row "grpo_tiled fwd_bwd B=1 T=4096, 2x4 seq,vocab" --kernel=grpo_tiled --mode=fwd_bwd "${S1[@]}" --mesh=2x4 --shard=seq,vocab
row "entropy_tiled fwd B=1 T=4096, 8-way vocab" --kernel=entropy_tiled "${S1[@]}" --mesh=8 --shard=vocab
row "grpo_fused_linear fwd_bwd B=8 T=4096 H=1536, 8-way batch" "${F[@]}" "${S8[@]}" --mesh=8 --shard=batch
row "grpo_fused_linear fwd_bwd B=1 T=4096 H=1536, 8-way vocab" "${F[@]}" "${S1[@]}" --mesh=8 --shard=vocab
row "grpo_fused_linear fwd_bwd B=8 T=4096 H=1536, 2x4 batch,vocab" "${F[@]}" "${S8[@]}" --mesh=2x4 --shard=batch,vocab
row "grpo_fused_linear fwd_bwd B=1 T=4096 H=1536, 2x4 seq,vocab" "${F[@]}" "${S1[@]}" --mesh=2x4 --shard=seq,vocab
row "grpo_fused_linear fwd_bwd B=8 T=4096 H=1536, 2x4 batch,vocab, --token-chunk=4096" "${F[@]}" "${S8[@]}" --mesh=2x4 --shard=batch,vocab --token-chunk=4096
row "grpo_fused_linear fwd_bwd B=8 T=4096 H=1536, 2x4 batch,vocab, --token-chunk=2048" "${F[@]}" "${S8[@]}" --mesh=2x4 --shard=batch,vocab --token-chunk=2048
row "grpo_fused_linear fwd_bwd B=1 T=4096 H=1536, 8-way vocab, --token-chunk=1024" "${F[@]}" "${S1[@]}" --mesh=8 --shard=vocab --token-chunk=1024

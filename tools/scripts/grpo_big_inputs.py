#!/usr/bin/env python3
"""GRPO inputs of any size as .npy files, written chunk by chunk (low memory).

  grpo_big_inputs.py --batch 8 --seq 4096 --vocab 151936 --dtype bf16 --out DIR [--seed 0]

Writes DIR/{logits,chosen_ids,completion_mask,advantages,old_logp,ref_logp}.npy for
`tpuoff run --kernel=grpo_tiled|grpo_reference --inputs=DIR` at shapes whose logits do not
fit in memory as float64 (the seed shape B=8, T=4096, V=151936 bf16 is a 10 GB file):
logits ~ 3 N(0,1) (bf16 via ml_dtypes, or f32), chosen ids uniform, ~80% of tokens
unmasked, old/ref log-probs = the exact log-softmax of the chosen logit (float64, per
chunk of rows) plus noise, advantages ~ N(0,1). Rows are generated 256 at a time into
memory-mapped files, so the process stays near 1 GB whatever the shape. Needs numpy and
ml_dtypes (the pinned venv of tools/xla_check/setup_venv.sh has both).
"""
import argparse
import sys
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=256, help="rows of logits per chunk")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    B, T, V = a.batch, a.seq, a.vocab
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.dtype == "bf16":
        import ml_dtypes
        dtype = ml_dtypes.bfloat16
    else:
        dtype = np.float32
    rng = np.random.default_rng(a.seed)
    y = rng.integers(0, V, (B, T)).astype(np.int32)
    mask = (rng.random((B, T)) < 0.8).astype(np.float32)
    mask[:, 0] = 1.0
    adv = rng.standard_normal(B).astype(np.float32)
    logp = np.empty((B, T), np.float64)
    logits = np.lib.format.open_memmap(out / "logits.npy", mode="w+", dtype=dtype, shape=(B, T, V))
    for b in range(B):
        for t0 in range(0, T, a.rows):
            t1 = min(T, t0 + a.rows)
            z = (3.0 * rng.standard_normal((t1 - t0, V), dtype=np.float32)).astype(dtype)
            logits[b, t0:t1] = z
            x = z.astype(np.float64)
            mx = x.max(-1, keepdims=True)
            lse = np.log(np.exp(x - mx).sum(-1)) + mx[:, 0]
            logp[b, t0:t1] = x[np.arange(t1 - t0), y[b, t0:t1]] - lse
        print(f"logits row {b + 1}/{B}", file=sys.stderr)
    logits.flush()
    del logits
    np.save(out / "chosen_ids.npy", y)
    np.save(out / "completion_mask.npy", mask)
    np.save(out / "advantages.npy", adv)
    np.save(out / "old_logp.npy", (logp + 0.25 * rng.standard_normal((B, T))).astype(np.float32))
    np.save(out / "ref_logp.npy", (logp + 0.1 * rng.standard_normal((B, T))).astype(np.float32))
    return 0


if __name__ == "__main__":
    sys.exit(main())

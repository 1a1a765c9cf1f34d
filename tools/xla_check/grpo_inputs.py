"""Inputs and kernel flags for the conformance matrix (numpy only, no jax).

make_inputs()      deterministic GLOBAL inputs of a GRPO/entropy/fused kernel module, named as
                   in shared/docs/GRPO_SPEC.md (logits or hidden+lm_head, chosen_ids,
                   completion_mask, advantages, old_logp, and lse/logp for --mode=bwd).
case_flags()       tpuoff kernel flags reproducing a test-vector case.json (tests/testdata).
Bf16 arrays are bf16-exact and stored as float32 (.npy has no bf16), like the testdata.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

# GRPO_SPEC.md tolerances by logits dtype; the fused kernel's (a matmul inside) are the
# test vectors' grpo_fused ones.
TOLERANCE = {
    ("grpo", "f32"): (1e-5, 1e-4), ("grpo", "bf16"): (2e-3, 2e-2),
    ("fused", "f32"): (1e-4, 1e-3), ("fused", "bf16"): (1e-2, 5e-2),
}


def tolerance(kernel: str, dtype: str) -> tuple:
    return TOLERANCE[("fused" if kernel == "grpo_fused_linear" else "grpo", dtype)]


def to_bf16_exact(a: np.ndarray) -> np.ndarray:
    import ml_dtypes
    return a.astype(ml_dtypes.bfloat16).astype(np.float32)


def _lse_logp(z: np.ndarray, y: np.ndarray, tau: float = 1.0) -> tuple:
    x = z.astype(np.float64) / tau
    mx = x.max(-1, keepdims=True)
    lse = (np.log(np.exp(x - mx).sum(-1, keepdims=True)) + mx)[..., 0]
    logp = np.take_along_axis(x, y[..., None].astype(np.int64), -1)[..., 0] - lse
    return lse, logp


def make_inputs(kernel: str, mode: str, B: int, T: int, V: int, dtype: str, seed: int,
                H: int = 16, token_advantages: bool = False, empty_row: bool = False) -> dict:
    """Every input a module of `kernel`/`mode` may take (the caller writes those the
    module names).  Ratios exp(logp - old_logp) straddle the clip range, ~20% of tokens
    are masked (every row keeps one, unless `empty_row`: then the last row is all masked),
    chosen ids cover the vocab incl. its ragged tail; rollout IS weights
    exp(old_logp - sampler_logp) fall on both sides of the usual caps; `token_advantages`
    makes advantages [B,T]."""
    rng = np.random.default_rng(seed)
    cast = to_bf16_exact if dtype == "bf16" else (lambda a: a.astype(np.float32))
    out: dict = {}
    if kernel == "grpo_fused_linear":
        hidden = cast(rng.standard_normal((B, T, H)) * 0.7)
        lm_head = cast(rng.standard_normal((H, V)) * (2.5 / np.sqrt(H)))
        out["hidden"], out["lm_head"] = hidden, lm_head
        z = hidden.astype(np.float64) @ lm_head.astype(np.float64)
    else:
        z = cast(3.0 * rng.standard_normal((B, T, V)))
        out["logits"] = z
    y = rng.integers(0, V, (B, T)).astype(np.int32)
    y[0, 0] = V - 1  # the last (ragged) vocab tile / shard is chosen at least once
    mask = (rng.random((B, T)) < 0.8).astype(np.float32)
    mask[:, 0] = 1.0
    lse, logp = _lse_logp(z, y)
    old = (logp + 0.25 * rng.standard_normal((B, T))).astype(np.float32)
    out.update({
        "chosen_ids": y, "completion_mask": mask,
        "advantages": rng.standard_normal(B).astype(np.float32),
        "old_logp": old,
        "ref_logp": (logp + 0.1 * rng.standard_normal((B, T))).astype(np.float32),
        "total_valid_tokens": np.float32(mask.sum() + 3.0),
    })
    # Drawn after the v1 inputs, so those stay what they were for a seed.
    sampler = (old + 0.3 * rng.standard_normal((B, T))).astype(np.float32)
    token_adv = rng.standard_normal((B, T)).astype(np.float32)
    if token_advantages:
        out["advantages"] = token_adv
    if empty_row and B > 1:
        mask[B - 1, :] = 0.0
        out["total_valid_tokens"] = np.float32(mask.sum() + 3.0)
    out["sampler_logp"] = sampler
    out["total_nonempty_rows"] = np.float32((mask.sum(1) > 0).sum() + 1.0)  # a global count
    if mode == "bwd":
        out["lse"] = lse.astype(np.float32)
        out["logp"] = logp.astype(np.float32)
    return out


def write_inputs(arrays: dict, names: list, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for n in names:
        if n not in arrays:
            raise KeyError(f"no generated input for module parameter '{n}'")
        np.save(out_dir / f"{n}.npy", np.asarray(arrays[n]))


def case_flags(case: dict) -> list:
    """tpuoff kernel flags (shape, dtype, parameters) of a testdata case.json."""
    s = case["shape"]
    flags = [f"--batch={s['B']}", f"--seq={s['T']}", f"--vocab={s['V']}",
             f"--logits-dtype={case.get('logits_dtype', 'f32')}"]
    if "H" in s:
        flags.append(f"--hidden={s['H']}")
    if case.get("on_policy"):
        flags.append("--on-policy")
    if "preset" in case:
        flags.append(f"--preset={case['preset']}")
    p = case.get("params", {})
    names = {"eps_low", "eps_high", "temperature", "beta", "delta", "loss_type", "max_len",
             "policy_loss", "kl_estimator", "log_ratio_clamp", "advantage_shape", "entropy_coef",
             "empty_rows", "sapo_tau_pos", "sapo_tau_neg", "is_level", "is_mode", "is_cap"}
    for k, v in p.items():
        if k == "total_valid_tokens":
            if v is not None:
                flags.append("--token-count-input")
        elif k == "total_nonempty_rows":
            if v is not None:
                flags.append("--row-count-input")
        elif k == "temp_mode":
            flags.append(f"--temperature-mode={v}")
        elif k in names:
            if v is not None:
                flags.append(f"--{k.replace('_', '-')}={v}")
        else:
            raise ValueError(f"case parameter {k} has no tpuoff flag")
    return flags

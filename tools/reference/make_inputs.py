"""Deterministic inputs for a GRPO / fused LM-head case, kept away from every clip, clamp
and cap boundary (the FD self-test and the vector generator both use it).

  Recipe(...)            how to draw one case (shape, dtype, params, input distributions)
  draw(recipe)           -> (Params, {input name: stored array}, reference outputs)

Arrays are what a case stores: float32 (bf16-exact float32 for bf16 cases) and int32 ids.
Every random number comes from numpy's PCG64 and is rounded to float32/bf16 before the
reference sees it, so the draw is identical on every machine.  A draw whose tokens come
within MIN_MARGIN (log-ratio or d units) of a boundary, or that misses an effect the
recipe expects (e.g. no IS weight above the cap), is redrawn from the next sub-seed;
the accepted draw is asserted again by the caller.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

import detmath as dm
import grpo_ref as ref

MIN_MARGIN = 1e-3
MAX_ATTEMPTS = 400


@dataclass(frozen=True)
class Recipe:
    name: str
    B: int
    T: int
    V: int
    H: int = 0                      # > 0: fused LM-head case (hidden @ lm_head)
    dtype: str = "f32"              # f32 | bf16 (of logits, or of hidden and lm_head)
    on_policy: bool = False
    params: dict = field(default_factory=dict)   # case.json "params"
    seed: int = 0
    logit_scale: float = 3.0        # logits ~ N(0, scale^2)
    peak: float = 0.0               # > 0: one column per token raised by `peak` (chosen half the time)
    ratio_spread: float = 0.25      # old_logp = logp + N(0, spread^2)
    ref_spread: float = 0.1         # ref_logp = logp + N(0, spread^2)
    lowvar_extremes: bool = False   # some |d| > 20 and some e^d - d - 1 > 10
    is_spread: float = 0.5          # log IS weight - log cap ~ N(0, spread^2) (per row for sequence)
    keep: float = 0.8               # P(token unmasked)
    prefix_mask: bool = False       # masks are a prefix of ones (completion then padding)
    empty_rows: tuple = ()          # rows with no unmasked token
    token_adv_zero: float = 0.0     # fraction of exactly-zero token advantages
    count_extra: float = 3.0        # total_valid_tokens = sum(mask) + extra (micro-batching)
    rows_extra: float = 1.0         # total_nonempty_rows = non-empty rows + extra
    expect: tuple = ()              # diag keys (grpo_ref.policy_terms) that must be > 0
    notes: str = ""

    @property
    def fused(self) -> bool:
        return self.H > 0


def to_bf16_exact(a: np.ndarray) -> np.ndarray:
    """Round float32 to the nearest bfloat16 (ties to even), returned as float32."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)


def _store(a, dtype: str) -> np.ndarray:
    a = np.asarray(a, np.float64).astype(np.float32)
    return to_bf16_exact(a) if dtype == "bf16" else a


def _one_draw(r: Recipe, p: ref.Params, rng: np.random.Generator) -> dict:
    B, T, V = r.B, r.T, r.V
    out: dict = {}
    if r.fused:
        hidden = _store(0.7 * rng.standard_normal((B, T, r.H)), r.dtype)
        lm_head = _store((2.5 / np.sqrt(r.H)) * rng.standard_normal((r.H, V)), r.dtype)
        out["hidden"], out["lm_head"] = hidden, lm_head
        z = ref.matmul(hidden.reshape(B * T, r.H).astype(np.float64),
                       lm_head.astype(np.float64)).reshape(B, T, V)
    else:
        zz = r.logit_scale * rng.standard_normal((B, T, V))
        y_peak = rng.integers(0, V, (B, T))
        if r.peak:
            np.put_along_axis(zz, y_peak[..., None], np.take_along_axis(zz, y_peak[..., None], -1) + r.peak, -1)
        z = _store(zz, r.dtype)
        out["logits"] = z
    y = rng.integers(0, V, (B, T))
    if not r.fused and r.peak:
        y = np.where(rng.random((B, T)) < 0.5, y_peak, y)
    y.flat[0] = V - 1              # the ragged last vocab tile / shard is chosen
    y.flat[-1] = 0
    out["chosen_ids"] = y.astype(np.int32)

    if r.prefix_mask:
        lengths = rng.integers(1, T + 1, B)
        mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float32)
    else:
        mask = (rng.random((B, T)) < r.keep).astype(np.float32)
        mask[:, 0] = 1.0
    for b in r.empty_rows:
        mask[b, :] = 0.0
    out["completion_mask"] = mask

    if p.advantage_shape == "token":
        adv = rng.standard_normal((B, T))
        adv = np.where(rng.random((B, T)) < r.token_adv_zero, 0.0, adv)
    else:
        adv = rng.standard_normal(B)
    out["advantages"] = adv.astype(np.float32)

    logp = ref.vocab_stats(np.asarray(z, np.float64), y, p)["logp"]
    if not p.on_policy:
        out["old_logp"] = (logp + r.ratio_spread * rng.standard_normal((B, T))).astype(np.float32)
    old = logp if p.on_policy else out["old_logp"].astype(np.float64)
    if p.beta != 0:
        d = r.ref_spread * rng.standard_normal((B, T))
        if r.lowvar_extremes:
            pick = rng.random((B, T))
            far = rng.uniform(21.0, 24.0, (B, T)) * np.where(rng.random((B, T)) < 0.5, -1.0, 1.0)
            big = rng.uniform(2.8, 4.0, (B, T))
            d = np.where(pick < 0.15, far, np.where(pick < 0.35, big, d))
        out["ref_logp"] = (logp + d).astype(np.float32)
    if p.is_level != "none":
        log_cap = float(dm.log(np.float64(p.is_cap)))
        if p.is_level == "token":
            lw = log_cap + r.is_spread * rng.standard_normal((B, T))
        else:
            n_row = np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
            row = log_cap + r.is_spread * rng.standard_normal((B, 1))
            lw = row / n_row + 0.05 * rng.standard_normal((B, T))
        out["sampler_logp"] = (old - lw).astype(np.float32)
    if p.token_count_input:
        out["total_valid_tokens"] = np.array(mask.sum() + r.count_extra, dtype=np.float32)
    if p.row_count_input:
        out["total_nonempty_rows"] = np.array((mask.sum(axis=1) > 0).sum() + r.rows_extra, dtype=np.float32)
    return out


def margin_problems(terms: dict, min_margin: float = MIN_MARGIN) -> list:
    """Boundaries some token comes within `min_margin` of: ['ratio_clip: 0.0004 at (1, 3)', ...]."""
    bad = []
    for k, m in terms["margins"].items():
        m = np.asarray(m)
        if m.size and float(m.min()) < min_margin:
            i = np.unravel_index(int(np.argmin(m)), m.shape)
            bad.append(f"{k}: {float(m.min()):.2g} at {tuple(int(v) for v in i)}")
    return bad


def param_problems(p: ref.Params) -> list:
    """Parameter pairs the kernels could resolve differently in float32."""
    bad = []
    if p.delta is not None and abs(np.log(p.delta) - np.log1p(p.eps_high)) < MIN_MARGIN:
        bad.append(f"delta={p.delta} within {MIN_MARGIN} of 1 + eps_high (log units)")
    return bad


def evaluate(r: Recipe, p: ref.Params, arrays: dict) -> dict:
    if r.fused:
        return ref.grpo_fused(arrays["hidden"], arrays["lm_head"], arrays, p)
    return ref.grpo(arrays["logits"], arrays, p)


def draw(r: Recipe) -> tuple:
    """(Params, stored inputs, reference outputs, attempt) of the first acceptable draw."""
    p = ref.Params.from_case(r.params, r.on_policy)
    if param_problems(p):
        raise ref.SpecError(f"{r.name}: {param_problems(p)}")
    for b in r.empty_rows:
        if not 0 <= b < r.B:
            raise ref.SpecError(f"{r.name}: empty row {b} outside B={r.B}")
    last = ""
    for attempt in range(MAX_ATTEMPTS):
        rng = np.random.default_rng([r.seed, attempt])
        arrays = _one_draw(r, p, rng)
        out = evaluate(r, p, arrays)
        problems = margin_problems(out["terms"])
        missing = [k for k in r.expect if out["terms"]["diag"].get(k, 0) <= 0]
        if not problems and not missing:
            return p, arrays, out, attempt
        last = "; ".join(problems + [f"no {k}" for k in missing])
    raise RuntimeError(f"{r.name}: no acceptable draw in {MAX_ATTEMPTS} attempts (last: {last})")


def with_params(r: Recipe, **changes) -> Recipe:
    return dataclasses.replace(r, **changes)

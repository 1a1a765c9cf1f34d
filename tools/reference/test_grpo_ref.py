#!/usr/bin/env python3
"""Self-test of the float64 reference (grpo_ref.py), run by ctest as `reference_selftest`.

1. detmath: exp/log/sigmoid within a few ulp of numpy's over wide ranges, exact at the
   special values; bf16 rounding ties to even.
2. Finite differences: for every option of GRPO_SPEC.md (v1 and v2) and a set of
   combinations, on small shapes drawn away from every clip/clamp/cap boundary, the
   analytic gradients against central differences of the loss in float64:
     dlogits    vs d loss / d logits          (every element)
     coef_logp  vs d loss / d logp            (every token; the loss as a function of logp)
     coef_H     vs d loss / d entropy         (every token)
     d_hidden, d_lm_head (fused form) vs d loss / d hidden, d lm_head (every element)
   Pass: |fd - analytic| <= FD_ATOL + FD_RTOL * |analytic| elementwise, with the step FD_STEP.
   On-policy configurations are differentiated with old_logp held at the unperturbed logp
   (old = stop_gradient(logp)).
3. Structure: masked tokens get exactly zero gradient; loss = sum(g * per_token_loss);
   lse/logp/entropy against a direct numpy evaluation.
Prints one line per check and 'N passed, N failed'; exit 1 on any failure.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import detmath as dm  # noqa: E402
import grpo_ref as ref  # noqa: E402
from make_inputs import Recipe, draw, to_bf16_exact  # noqa: E402

FD_STEP = 1e-5
FD_ATOL = 1e-9
FD_RTOL = 1e-6

RESULTS: list = []


def record(name: str, ok: bool, detail: str = "") -> None:
    RESULTS.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f" -- {detail}" if detail else ""), flush=True)


# ---------------------------------------------------------------------------------------
# 1. detmath

def ulp_error(got: np.ndarray, want: np.ndarray) -> float:
    finite = np.isfinite(want) & (want != 0)
    return float(np.max(np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]))))


def check_detmath() -> None:
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-745, 709, 200000), rng.uniform(-1, 1, 100000),
                        rng.standard_normal(100000) * 1e-8])
    e = ulp_error(dm.exp(x), np.exp(x))
    record("detmath.exp within 4 ulp of numpy on [-745, 709]", e <= 4, f"max {e:.2f} ulp")
    special = dm.exp(np.array([0.0, -np.inf, np.inf, np.nan, 710.0, -746.0, 1.0]))
    record("detmath.exp special values",
           special[0] == 1 and special[1] == 0 and special[2] == np.inf and np.isnan(special[3])
           and special[4] == np.inf and special[5] == 0 and abs(special[6] - np.e) <= 4e-16 * np.e,
           str(special))
    y = np.concatenate([np.exp(rng.uniform(-700, 700, 200000)), rng.uniform(0.5, 2.0, 100000),
                        1.0 + rng.standard_normal(10000) * 1e-9, np.array([5e-324, 1.7e308])])
    e = ulp_error(dm.log(y), np.log(y))
    near_one = np.abs(dm.log(y[300000:310000]) - np.log(y[300000:310000])).max()
    record("detmath.log within 4 ulp of numpy on (0, 1.7e308]", e <= 4 and near_one < 1e-24,
           f"max {e:.2f} ulp, near 1 max abs {near_one:.2g}")
    special = dm.log(np.array([0.0, -1.0, np.inf, np.nan, 1.0]))
    record("detmath.log special values", special[0] == -np.inf and np.isnan(special[1])
           and special[2] == np.inf and np.isnan(special[3]) and special[4] == 0, str(special))
    u = rng.uniform(-60, 60, 100000)
    s = dm.sigmoid(u)
    want = 1.0 / (1.0 + np.exp(-u))
    record("detmath.sigmoid", np.max(np.abs(s - want) / want) < 1e-14 and dm.sigmoid(np.array([-800.0]))[0] == 0)
    z = rng.standard_normal((3, 5, 11)) * 30
    lse = dm.logsumexp(z)
    want = np.log(np.sum(np.exp(z - z.max(-1, keepdims=True)), -1)) + z.max(-1)
    record("detmath.logsumexp", np.max(np.abs(lse - want)) < 1e-12)
    # 1 + 2^-8 and 1 + 3*2^-8 are ties: to the even mantissa (1.0 and 1 + 2^-6).
    a = np.array([1.0, 1.00390625, 1.01171875, 1.005859375, 1.0078125 + 2 ** -9, 3.14159, -2.5e-3, 65504.0],
                 np.float32)
    b = to_bf16_exact(a)
    want = np.array([1.0, 1.0, 1.015625, 1.0078125, 1.0078125, 3.140625, -0.0025024414, 65536.0], np.float32)
    record("bf16 rounding (nearest, ties to even)", np.array_equal(b, want), "" if np.array_equal(b, want)
           else f"{b} vs {want}")


# ---------------------------------------------------------------------------------------
# 2. Finite differences

def base(name: str, **kw) -> Recipe:
    d = dict(name=name, B=3, T=4, V=7, seed=sum(map(ord, name)),
             logit_scale=1.5, keep=0.75)
    d.update(kw)
    return Recipe(**d)


def fd_recipes() -> list:
    r = []
    add = r.append
    # v1
    add(base("v1_defaults", expect=("pg_live", "pg_dead")))
    add(base("v1_on_policy", on_policy=True))
    add(base("v1_pre_softmax_tau", params={"temperature": 0.7}, expect=("pg_live", "pg_dead")))
    add(base("v1_post_lse_tau", params={"temperature": 1.3, "temp_mode": "post_lse"}))
    add(base("v1_beta_k3", params={"beta": 0.3}, ref_spread=0.5))
    add(base("v1_delta", params={"delta": 1.3, "eps_high": 0.28}, ratio_spread=0.6,
             expect=("delta_active", "pg_live")))
    add(base("v1_sequence_mean", params={"loss_type": "sequence_mean"}, empty_rows=(1,)))
    add(base("v1_constant", params={"loss_type": "constant", "max_len": 6}))
    add(base("v1_token_count", params={"total_valid_tokens": 1.0}))
    # policy losses
    add(base("gspo", params={"policy_loss": "gspo", "loss_type": "sequence_mean"}, B=4, ratio_spread=0.3,
             expect=("gspo_rows_in", "gspo_rows_out")))
    add(base("gspo_token_mean", params={"policy_loss": "gspo"}, B=4, ratio_spread=0.3, expect=("gspo_rows_in",)))
    add(base("gspo_token", params={"policy_loss": "gspo_token", "loss_type": "sequence_mean"}, B=4,
             ratio_spread=0.3, expect=("gspo_rows_in", "gspo_rows_out")))
    add(base("cispo", params={"policy_loss": "cispo"}, ratio_spread=0.4, expect=("cispo_trunc",)))
    add(base("cispo_upper_only", params={"policy_loss": "cispo", "eps_low": 1.0, "eps_high": 0.28},
             ratio_spread=0.4, expect=("cispo_trunc",)))
    add(base("sapo_default_taus", params={"policy_loss": "sapo"}, expect=("a_pos", "a_neg")))
    add(base("sapo_taus", params={"policy_loss": "sapo", "sapo_tau_pos": 0.8, "sapo_tau_neg": 1.3},
             ratio_spread=0.5, expect=("a_pos", "a_neg")))
    # KL estimators
    add(base("kl_k1", params={"beta": 0.2, "kl_estimator": "k1"}, ref_spread=0.5))
    add(base("kl_k2", params={"beta": 0.2, "kl_estimator": "k2"}, ref_spread=0.5))
    add(base("kl_low_var_kl", params={"beta": 0.2, "kl_estimator": "low_var_kl"}, lowvar_extremes=True,
             T=6, expect=("lowvar_dclip", "lowvar_kclip")))
    # log-ratio clamp in every surrogate
    for pl in ("ppo_clip", "gspo", "gspo_token", "cispo", "sapo"):
        add(base(f"clamp_{pl}", params={"policy_loss": pl, "log_ratio_clamp": 0.3}, ratio_spread=0.5,
                 expect=("clamped",)))
    # advantages per token (some exactly zero)
    add(base("token_advantages_ppo", params={"advantage_shape": "token"}, token_adv_zero=0.2))
    add(base("token_advantages_gspo", params={"advantage_shape": "token", "policy_loss": "gspo"}, B=4,
             ratio_spread=0.3))
    add(base("token_advantages_sapo", params={"advantage_shape": "token", "policy_loss": "sapo"}))
    # entropy bonus
    add(base("entropy_pre_softmax", params={"entropy_coef": 0.05, "temperature": 0.7}))
    add(base("entropy_post_lse", params={"entropy_coef": 0.05, "temperature": 1.3, "temp_mode": "post_lse"}))
    add(base("entropy_negative_on_policy", params={"entropy_coef": -0.02}, on_policy=True))
    # empty rows
    add(base("empty_rows_skip", params={"loss_type": "sequence_mean", "empty_rows": "skip"}, empty_rows=(0, 2),
             B=4))
    add(base("empty_rows_skip_row_count", params={"loss_type": "sequence_mean", "empty_rows": "skip",
                                                  "total_nonempty_rows": 1.0}, empty_rows=(1,), B=4))
    # rollout IS correction
    for level in ("token", "sequence"):
        for mode in ("truncate", "mask"):
            add(base(f"is_{level}_{mode}", params={"is_level": level, "is_mode": mode, "is_cap": 1.7},
                     B=5, expect=("is_over", "is_under")))
    add(base("is_token_on_policy_gspo", params={"is_level": "token", "policy_loss": "gspo"}, on_policy=True,
             expect=("is_over", "is_under")))
    add(base("is_sequence_on_policy_sapo", params={"is_level": "sequence", "is_mode": "mask",
                                                   "policy_loss": "sapo"}, on_policy=True, B=5,
             expect=("is_over", "is_under")))
    # combinations
    add(base("combo_ppo_everything", params={
        "policy_loss": "ppo_clip", "delta": 1.6, "log_ratio_clamp": 0.35, "beta": 0.05, "kl_estimator": "k3",
        "advantage_shape": "token", "entropy_coef": 0.02, "loss_type": "sequence_mean", "empty_rows": "skip",
        "is_level": "token", "is_mode": "truncate", "is_cap": 1.5, "temperature": 0.9, "temp_mode": "post_lse"},
        B=4, T=5, empty_rows=(3,), ratio_spread=0.5, expect=("clamped", "is_over", "is_under")))
    add(base("combo_gspo_token_bf16", dtype="bf16", params={
        "policy_loss": "gspo_token", "advantage_shape": "token", "beta": 0.05, "kl_estimator": "k2",
        "entropy_coef": 0.02, "eps_high": 0.28, "is_level": "sequence", "is_mode": "mask"}, B=4))
    add(base("combo_cispo_lowvar_count", params={
        "policy_loss": "cispo", "beta": 0.1, "kl_estimator": "low_var_kl", "total_valid_tokens": 1.0,
        "temperature": 1.2}, lowvar_extremes=True, T=6, expect=("cispo_trunc",)))
    add(base("combo_sapo_k1_constant_on_policy", on_policy=True, params={
        "policy_loss": "sapo", "beta": 0.1, "kl_estimator": "k1", "loss_type": "constant", "max_len": 9,
        "entropy_coef": 0.01, "temperature": 0.8, "temp_mode": "post_lse"}))
    add(base("combo_gspo_clamp_is_rows", params={
        "policy_loss": "gspo", "log_ratio_clamp": 0.4, "loss_type": "sequence_mean", "empty_rows": "skip",
        "total_nonempty_rows": 1.0, "is_level": "sequence", "is_mode": "truncate", "is_cap": 2.5,
        "advantage_shape": "token"}, B=5, empty_rows=(2,), ratio_spread=0.45, expect=("clamped",)))
    return r


def fused_recipes() -> list:
    f = dict(B=2, T=3, V=6, H=4)
    return [
        base("fused_defaults", **f),
        base("fused_post_lse_beta_on_policy", on_policy=True,
             params={"temperature": 1.3, "temp_mode": "post_lse", "beta": 0.1}, **f),
        base("fused_gspo_entropy_is", params={"policy_loss": "gspo", "entropy_coef": 0.05, "is_level": "token",
                                              "loss_type": "sequence_mean"}, **f),
        base("fused_cispo_clamp_k2", params={"policy_loss": "cispo", "log_ratio_clamp": 0.3, "beta": 0.1,
                                             "kl_estimator": "k2", "advantage_shape": "token"}, **f),
        base("fused_sapo_lowvar_tau", params={"policy_loss": "sapo", "beta": 0.2, "kl_estimator": "low_var_kl",
                                              "entropy_coef": 0.03, "temperature": 0.7},
             lowvar_extremes=True, **f),
    ]


def off_policy_view(p: ref.Params, arrays: dict, logp0: np.ndarray) -> tuple:
    """The same loss with old_logp a constant: on-policy old = stop_gradient(logp) is the
    unperturbed logp, held fixed while differentiating."""
    if not p.on_policy:
        return p, arrays
    return dataclasses.replace(p, on_policy=False), dict(arrays, old_logp=logp0)


def central_diff(f, x: np.ndarray) -> np.ndarray:
    g = np.zeros_like(x)
    flat, gf = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + FD_STEP
        up = f(x)
        flat[i] = keep - FD_STEP
        down = f(x)
        flat[i] = keep
        gf[i] = (up - down) / (2 * FD_STEP)
    return g


WORST: dict = {}


def close(label: str, what: str, fd: np.ndarray, an: np.ndarray) -> None:
    err = np.abs(fd - an)
    excess = err / (FD_ATOL + FD_RTOL * np.abs(an))
    WORST[what] = max(WORST.get(what, 0.0), float(excess.max()))
    scale = float(np.abs(an).max())
    ok = bool(np.all(excess <= 1.0)) and np.all(np.isfinite(an))
    record(f"fd {label}: {what}", ok, f"max |fd-an| {err.max():.2g}, max |an| {scale:.2g}, "
                                      f"worst/tol {excess.max():.2g}")


def check_fd(r: Recipe) -> None:
    p, arrays, out, _ = draw(r)
    t = out["terms"]
    logp0, H0 = out["logp"], out["entropy"]
    q, inputs = off_policy_view(p, arrays, logp0)
    sg = t["frozen"]  # stop-gradient values, held at the unperturbed point
    if r.fused:
        h0 = arrays["hidden"].astype(np.float64)
        w0 = arrays["lm_head"].astype(np.float64)
        close(r.name, "d_hidden", central_diff(lambda h: ref.grpo_fused(h, w0, inputs, q, sg)["loss"], h0.copy()),
              out["d_hidden"])
        close(r.name, "d_lm_head", central_diff(lambda w: ref.grpo_fused(h0, w, inputs, q, sg)["loss"], w0.copy()),
              out["d_lm_head"])
    else:
        z0 = arrays["logits"].astype(np.float64)
        close(r.name, "dlogits", central_diff(lambda z: ref.grpo(z, inputs, q, sg)["loss"], z0.copy()),
              out["dlogits"])
    close(r.name, "coef_logp",
          central_diff(lambda lp: ref.policy_terms(lp, H0, inputs, q, sg)["loss"], logp0.copy()), t["coef_logp"])
    close(r.name, "coef_H", central_diff(lambda h: ref.policy_terms(logp0, h, inputs, q, sg)["loss"], H0.copy()),
          t["coef_H"])
    # Structure: masked tokens get exactly zero gradient, loss = sum g * per_token_loss.
    masked = arrays["completion_mask"] == 0
    grad = out["d_hidden"] if r.fused else out["dlogits"]
    zero = bool(np.all(grad[masked] == 0) and np.all(t["coef_logp"][masked] == 0)
                and np.all(t["coef_H"][masked] == 0))
    agg = abs(out["loss"] - np.sum(t["g"] * out["per_token_loss"])) <= 1e-15 * max(1.0, abs(out["loss"]))
    record(f"structure {r.name}: masked tokens zero gradient, loss = sum g*ptl", zero and agg,
           f"{int(masked.sum())} masked tokens; diag {t['diag']}")


def check_negative_controls() -> None:
    """The FD comparison can fail: differentiating gspo_token's and cispo's values without
    their stop-gradients (i.e. plain gspo, and cispo's ratio with a gradient) disagrees
    with the analytic coefficients of the spec."""
    for r in (base("neg_gspo_token", params={"policy_loss": "gspo_token", "advantage_shape": "token"}, B=4,
                   ratio_spread=0.3),
              base("neg_cispo", params={"policy_loss": "cispo"}, ratio_spread=0.4, expect=("cispo_trunc",))):
        p, arrays, out, _ = draw(r)
        fd = central_diff(lambda lp: ref.policy_terms(lp, out["entropy"], arrays, p)["loss"], out["logp"].copy())
        an = out["terms"]["coef_logp"]
        excess = np.abs(fd - an) / (FD_ATOL + FD_RTOL * np.abs(an))
        record(f"negative control {r.name}: FD without stop-gradients is rejected", bool(excess.max() > 1e3),
               f"worst/tol {excess.max():.2g}")


def check_direct_stats() -> None:
    """lse, logp, entropy against a plain numpy evaluation (np.exp/np.log)."""
    rng = np.random.default_rng(3)
    z = rng.standard_normal((2, 5, 33)) * 4
    y = rng.integers(0, 33, (2, 5))
    for mode, tau in (("pre_softmax", 0.7), ("post_lse", 1.4)):
        p = ref.Params(temperature=tau, temp_mode=mode)
        st = ref.vocab_stats(z, y, p)
        x = z / tau if mode == "pre_softmax" else z
        lse = np.log(np.sum(np.exp(x), -1))
        logp = (np.take_along_axis(x, y[..., None], -1)[..., 0] - lse) / (tau if mode == "post_lse" else 1)
        q = np.exp(z / tau) / np.sum(np.exp(z / tau), -1, keepdims=True)
        ent = -np.sum(q * np.log(q), -1)
        ok = (np.allclose(st["lse"], lse, rtol=0, atol=1e-12) and np.allclose(st["logp"], logp, rtol=0, atol=1e-12)
              and np.allclose(st["entropy"], ent, rtol=0, atol=1e-12)
              and np.allclose(ref.entropy(z, tau), ent, rtol=0, atol=1e-12))
        record(f"vocab stats vs plain numpy ({mode}, tau={tau})", ok)


def main() -> int:
    t0 = time.time()
    check_detmath()
    check_direct_stats()
    check_negative_controls()
    for r in fd_recipes() + fused_recipes():
        try:
            check_fd(r)
        except Exception as e:  # a crash is a failure of that configuration, keep going
            record(f"fd {r.name}", False, f"{type(e).__name__}: {e}")
    print("worst |fd - analytic| / (%g + %g |analytic|) per gradient (step %g): %s" % (
        FD_ATOL, FD_RTOL, FD_STEP, ", ".join(f"{k} {v:.3g}" for k, v in sorted(WORST.items()))))
    npass = sum(RESULTS)
    print(f"{npass} passed, {len(RESULTS) - npass} failed in {time.time() - t0:.1f}s")
    return 0 if npass == len(RESULTS) and RESULTS else 1


if __name__ == "__main__":
    sys.exit(main())

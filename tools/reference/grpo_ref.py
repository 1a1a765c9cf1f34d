"""tpuoff's own float64 reference of GRPO_SPEC.md: the GRPO loss (v1 and every
"Policy-loss variants (v2)" option), the token entropy, and the fused LM-head form.

Everything is float64 with analytic gradients; transcendentals come from detmath so the
results are bit-identical on every machine.  Entry points:

  Params.from_case(params_dict, on_policy)  the case.json "params" block
  grpo(z, inputs, params)                   logits [B,T,V] -> outputs + internals
  grpo_fused(hidden, lm_head, inputs, p)    hidden [B,T,H] @ lm_head [H,V] -> same with
                                            d_hidden, d_lm_head instead of dlogits
  entropy(z, temperature)                   the entropy kernels' output
  policy_terms(logp, H, inputs, params)     per-token loss, loss and its coefficients
                                            d loss / d logp and d loss / d entropy

`inputs` maps HLO parameter names (chosen_ids, completion_mask, advantages, old_logp,
ref_logp, sampler_logp, total_valid_tokens, total_nonempty_rows) to arrays; absent
optional inputs are simply missing.  On-policy: no old_logp (old = stop_gradient(logp)).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

import detmath as dm

POLICY_LOSSES = ("ppo_clip", "gspo", "gspo_token", "cispo", "sapo")
KL_ESTIMATORS = ("k3", "k1", "k2", "low_var_kl")
LOSS_TYPES = ("token_mean", "sequence_mean", "constant")
TEMP_MODES = ("pre_softmax", "post_lse")
# low_var_kl clips d to +-LOWVAR_D and the estimate to +-LOWVAR_K.
LOWVAR_D, LOWVAR_K = 20.0, 10.0


class SpecError(ValueError):
    """A parameter or input combination the spec does not allow."""


@dataclass(frozen=True)
class Params:
    eps_low: float = 0.2
    eps_high: float = 0.2
    temperature: float = 1.0
    temp_mode: str = "pre_softmax"
    beta: float = 0.0
    delta: Optional[float] = None
    loss_type: str = "token_mean"
    max_len: Optional[int] = None
    policy_loss: str = "ppo_clip"
    kl_estimator: str = "k3"
    log_ratio_clamp: Optional[float] = None
    advantage_shape: str = "sequence"
    entropy_coef: float = 0.0
    empty_rows: str = "count"
    sapo_tau_pos: float = 1.0
    sapo_tau_neg: float = 1.05
    is_level: str = "none"
    is_mode: str = "truncate"
    is_cap: float = 2.0
    on_policy: bool = False
    token_count_input: bool = False   # total_valid_tokens is a run-time input
    row_count_input: bool = False     # total_nonempty_rows is a run-time input

    # case.json params keys that are not fields of their own.
    _ALIASES = {"temperature_mode": "temp_mode"}

    @staticmethod
    def from_case(params: dict, on_policy: bool) -> "Params":
        kw = {"on_policy": bool(on_policy)}
        fields = {f.name for f in dataclasses.fields(Params)} - {
            "on_policy", "token_count_input", "row_count_input"}
        for k, v in params.items():
            k = Params._ALIASES.get(k, k)
            if k == "total_valid_tokens":
                kw["token_count_input"] = v is not None
            elif k == "total_nonempty_rows":
                kw["row_count_input"] = v is not None
            elif k in fields:
                kw[k] = v
            else:
                raise SpecError(f"unknown case parameter '{k}'")
        p = Params(**kw)
        p.validate()
        return p

    def validate(self) -> None:
        def need(ok, what):
            if not ok:
                raise SpecError(what)
        need(0 <= self.eps_low <= 1, f"eps_low={self.eps_low} not in [0, 1]")
        need(self.eps_high >= 0, f"eps_high={self.eps_high} < 0")
        need(self.temperature > 0, f"temperature={self.temperature} <= 0")
        need(self.temp_mode in TEMP_MODES, f"temp_mode={self.temp_mode}")
        need(self.delta is None or self.delta > 1, f"delta={self.delta} must be > 1")
        need(self.delta is None or self.policy_loss == "ppo_clip", "delta applies to ppo_clip only")
        need(self.loss_type in LOSS_TYPES, f"loss_type={self.loss_type}")
        need(self.max_len is None or self.max_len >= 1, f"max_len={self.max_len}")
        need(self.policy_loss in POLICY_LOSSES, f"policy_loss={self.policy_loss}")
        need(self.kl_estimator in KL_ESTIMATORS, f"kl_estimator={self.kl_estimator}")
        need(self.log_ratio_clamp is None or self.log_ratio_clamp > 0,
             f"log_ratio_clamp={self.log_ratio_clamp} must be > 0")
        need(self.advantage_shape in ("sequence", "token"), f"advantage_shape={self.advantage_shape}")
        need(self.empty_rows in ("count", "skip"), f"empty_rows={self.empty_rows}")
        need(self.sapo_tau_pos > 0 and self.sapo_tau_neg > 0, "sapo taus must be > 0")
        need(self.is_level in ("none", "token", "sequence"), f"is_level={self.is_level}")
        need(self.is_mode in ("truncate", "mask"), f"is_mode={self.is_mode}")
        need(self.is_cap > 0, f"is_cap={self.is_cap} must be > 0")
        need(not self.token_count_input or self.loss_type == "token_mean",
             "total_valid_tokens needs loss_type token_mean")
        need(not self.row_count_input or (self.loss_type == "sequence_mean" and self.empty_rows == "skip"),
             "total_nonempty_rows needs loss_type sequence_mean with empty_rows skip")

    def input_names(self, fused: bool = False) -> list:
        """Entry parameter names in the order of GRPO_SPEC.md's input table."""
        names = ["hidden", "lm_head"] if fused else ["logits"]
        names += ["chosen_ids", "completion_mask", "advantages"]
        if not self.on_policy:
            names.append("old_logp")
        if self.beta != 0:
            names.append("ref_logp")
        if self.is_level != "none":
            names.append("sampler_logp")
        if self.token_count_input:
            names.append("total_valid_tokens")
        if self.row_count_input:
            names.append("total_nonempty_rows")
        return names


# ---------------------------------------------------------------------------------------
# Per-token statistics over the vocabulary.

def vocab_stats(z: np.ndarray, y: np.ndarray, p: Params) -> dict:
    """lse, logp and entropy of logits z [B,T,V] (float64) at chosen ids y [B,T], plus
    the softmaxes the gradients need."""
    tau = float(p.temperature)
    zs = z / tau                                       # z/tau: entropy in both modes
    x = zs if p.temp_mode == "pre_softmax" else z
    lse = dm.logsumexp(x)
    xy = np.take_along_axis(x, y[..., None].astype(np.int64), -1)[..., 0]
    logp = xy - lse
    if p.temp_mode == "post_lse":
        logp = logp / tau
    lse_s = lse if p.temp_mode == "pre_softmax" else dm.logsumexp(zs)
    log_q = zs - lse_s[..., None]                      # log softmax(z/tau)
    q = dm.exp(log_q)
    ent = lse_s - np.sum(q * zs, axis=-1)
    soft_x = q if p.temp_mode == "pre_softmax" else dm.exp(x - lse[..., None])
    return {"lse": lse, "logp": logp, "entropy": ent, "softmax_x": soft_x, "q": q, "log_q": log_q}


def entropy(z: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """The entropy kernels' output: H of softmax(z/temperature), [B,T]."""
    zs = np.asarray(z, np.float64) / float(temperature)
    lse = dm.logsumexp(zs)
    q = dm.exp(zs - lse[..., None])
    return lse - np.sum(q * zs, axis=-1)


# ---------------------------------------------------------------------------------------
# The loss as a function of the per-token logp and entropy.

def _f64(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def aggregation_weights(mask: np.ndarray, p: Params, inputs: dict) -> np.ndarray:
    """g = d loss / d per_token_loss (GRPO_SPEC.md step 7 and v2 empty_rows)."""
    B, T = mask.shape
    if p.loss_type == "token_mean":
        n = float(_f64(inputs["total_valid_tokens"])) if p.token_count_input else float(np.sum(mask))
        return mask / max(n, 1.0)
    if p.loss_type == "sequence_mean":
        per_row = np.maximum(np.sum(mask, axis=1, keepdims=True), 1.0)
        if p.empty_rows == "count":
            rows = float(B)
        elif p.row_count_input:
            rows = max(float(_f64(inputs["total_nonempty_rows"])), 1.0)
        else:
            rows = max(float(np.sum(np.sum(mask, axis=1) > 0)), 1.0)
        return mask / per_row / rows
    max_len = p.max_len if p.max_len is not None else T
    return mask / float(B * max_len)


def is_weights(logp: np.ndarray, mask: np.ndarray, p: Params, inputs: dict) -> tuple:
    """Rollout importance-sampling weight per token (no gradient) and its log before the cap."""
    if p.is_level == "none":
        return np.ones_like(logp), None
    old = _f64(inputs["old_logp"]) if not p.on_policy else logp
    lw = old - _f64(inputs["sampler_logp"])
    if p.is_level == "sequence":
        lw = np.broadcast_to(np.sum(mask * lw, axis=1, keepdims=True), logp.shape).copy()
    w = dm.exp(lw)
    cap = float(p.is_cap)
    w = np.minimum(w, cap) if p.is_mode == "truncate" else np.where(w <= cap, w, 0.0)
    return w, lw


def kl_term(logp: np.ndarray, ref: np.ndarray, p: Params) -> tuple:
    """(k, dk/dlogp) of the chosen estimator at d = ref - logp."""
    d = ref - logp
    if p.kl_estimator == "k3":
        ed = dm.exp(d)
        return ed - d - 1.0, 1.0 - ed
    if p.kl_estimator == "k1":
        return -d, np.ones_like(d)
    if p.kl_estimator == "k2":
        return 0.5 * d * d, -d
    dc = np.clip(d, -LOWVAR_D, LOWVAR_D)
    ed = dm.exp(dc)
    raw = ed - dc - 1.0
    live = (np.abs(d) < LOWVAR_D) & (raw > -LOWVAR_K) & (raw < LOWVAR_K)
    return np.clip(raw, -LOWVAR_K, LOWVAR_K), np.where(live, 1.0 - ed, 0.0)


def policy_terms(logp, H, inputs: dict, p: Params, frozen: Optional[dict] = None) -> dict:
    """per_token_loss, loss, coef_logp = d loss/d logp and coef_H = d loss/d entropy.

    `inputs["old_logp"]` is a constant; on-policy (p.on_policy) old = stop_gradient(logp):
    its value is logp's, its gradient zero.  The other stop-gradients of the spec (cispo's
    clipped ratio; gspo_token's sg(row mean) and sg(own log-ratio)) are returned in
    `frozen`; passing them back evaluates the loss with those values held fixed, which is
    what the analytic coefficients differentiate (test_grpo_ref.py's finite differences).
    Also returns `diag` (what the case exercises) and `margins` (distance of every token
    to each clip/clamp/cap boundary, in log-ratio or d units)."""
    logp, H = _f64(logp), _f64(H)
    mask = _f64(inputs["completion_mask"])
    B, T = mask.shape
    adv = _f64(inputs["advantages"])
    if p.advantage_shape == "sequence":
        if adv.shape != (B,):
            raise SpecError(f"advantages shape {adv.shape}, want ({B},)")
        A = np.broadcast_to(adv[:, None], (B, T))
    else:
        if adv.shape != (B, T):
            raise SpecError(f"advantages shape {adv.shape}, want ({B}, {T})")
        A = adv
    old = logp if p.on_policy else _f64(inputs["old_logp"])
    g = aggregation_weights(mask, p, inputs)
    w, log_w = is_weights(logp, mask, p, inputs)
    on = mask > 0
    diag = {"tokens": int(on.sum()), "a_pos": int((on & (A > 0)).sum()), "a_neg": int((on & (A < 0)).sum())}
    margins: dict = {}

    # Log-ratio, clamped per token before any exp.
    dlr = logp - old
    if p.log_ratio_clamp is not None:
        c = float(p.log_ratio_clamp)
        dc = np.clip(dlr, -c, c)
        live = (np.abs(dlr) < c).astype(np.float64)
        margins["log_ratio_clamp"] = np.abs(np.abs(dlr) - c)
        diag["clamped"] = int((on & (live == 0)).sum())
    else:
        dc, live = dlr, np.ones_like(dlr)
    lo = float(dm.log(1.0 - p.eps_low)) if p.eps_low < 1 else None   # boundaries, log-ratio units
    hi = float(dm.log(1.0 + p.eps_high))

    def clip_margin(v):
        m = np.abs(v - hi)
        return m if lo is None else np.minimum(m, np.abs(v - lo))

    pl = p.policy_loss
    sg: dict = {}
    # dsur: d surrogate_bt / d logp_bt (token-local part); gspo adds a row coupling below.
    if pl == "ppo_clip":
        r = dm.exp(dc)
        rc = np.clip(r, 1.0 - p.eps_low, 1.0 + p.eps_high)
        rd = np.minimum(r, p.delta) if p.delta is not None else r
        sur = -np.minimum(rd * A, rc * A)
        unclipped = A * rc >= A * rd
        dsur = -A * r * unclipped * live
        margins["ratio_clip"] = clip_margin(dc)
        if p.delta is not None:
            dsur = dsur * (r <= p.delta)
            margins["delta"] = np.abs(dc - dm.log(p.delta))
            diag["delta_active"] = int((on & (r > p.delta)).sum())
        diag["pg_live"] = int((on & (dsur != 0)).sum())
        diag["pg_dead"] = int((on & (dsur == 0) & (A != 0)).sum())
    elif pl in ("gspo", "gspo_token"):
        n_row = np.maximum(np.sum(mask, axis=1, keepdims=True), 1.0)
        dbar = np.sum(mask * dc, axis=1, keepdims=True) / n_row
        sg["dbar"], sg["dc"] = dbar, dc
        if pl == "gspo_token" and frozen is not None:
            # log s_bt = sg(row mean) + dc_bt - sg(dc_bt): the value is the row's, the
            # gradient the token's own.
            s = dm.exp(frozen["dbar"] + dc - frozen["dc"])
        else:
            s = np.broadcast_to(dm.exp(dbar), (B, T))
        sc = np.clip(s, 1.0 - p.eps_low, 1.0 + p.eps_high)
        sur = -np.minimum(s * A, sc * A)
        unclipped = A * sc >= A * s
        u = -A * s * unclipped                        # d sur_bt / d log s_b
        dsur = u * live if pl == "gspo_token" else np.zeros_like(u)
        margins["seq_ratio_clip"] = clip_margin(np.broadcast_to(dbar, (B, T)))
        inside = (dbar[:, 0] > (lo if lo is not None else -np.inf)) & (dbar[:, 0] < hi)
        diag["gspo_rows_in"] = int(inside.sum())
        diag["gspo_rows_out"] = int((~inside).sum())
        diag["pg_live"] = int((on & (u != 0)).sum())
        diag["pg_dead"] = int((on & (u == 0) & (A != 0)).sum())
    elif pl == "cispo":
        rc = np.clip(dm.exp(dc), 1.0 - p.eps_low, 1.0 + p.eps_high)
        sg["cispo_weight"] = rc
        if frozen is not None:
            rc = frozen["cispo_weight"]
        sur = -rc * A * logp
        dsur = -rc * A
        margins["ratio_clip"] = clip_margin(dc)
        diag["cispo_trunc"] = int((on & (sg["cispo_weight"] != dm.exp(dc))).sum())
    else:  # sapo
        r = dm.exp(dc)
        tau_s = np.where(A > 0, p.sapo_tau_pos, p.sapo_tau_neg)
        sig = dm.sigmoid(tau_s * (r - 1.0))
        sur = -(4.0 / tau_s) * sig * A
        dsur = -4.0 * sig * (1.0 - sig) * r * A * live

    ptl = w * sur
    coef = g * w * dsur
    if pl == "gspo":
        # Every token of the row reaches logp_bt' through the row mean of the clamped log-ratio.
        row = np.sum(g * w * u, axis=1, keepdims=True)
        coef = row * mask / np.maximum(np.sum(mask, axis=1, keepdims=True), 1.0) * live
    if p.beta != 0:
        k, dk = kl_term(logp, _f64(inputs["ref_logp"]), p)
        ptl = ptl + p.beta * k
        coef = coef + g * p.beta * dk
        if p.kl_estimator == "low_var_kl":
            d = _f64(inputs["ref_logp"]) - logp
            margins["low_var_d"] = np.abs(np.abs(d) - LOWVAR_D)
            margins["low_var_k"] = lowvar_k_margin(np.clip(d, -LOWVAR_D, LOWVAR_D))
            diag["lowvar_dclip"] = int((on & (np.abs(d) > LOWVAR_D)).sum())
            diag["lowvar_kclip"] = int((on & (np.abs(d) <= LOWVAR_D) & (k >= LOWVAR_K)).sum())
    if p.entropy_coef != 0:
        ptl = ptl - p.entropy_coef * H
    coef_H = -p.entropy_coef * g
    if log_w is not None:
        log_cap = dm.log(p.is_cap)
        margins["is_cap"] = np.abs(log_w - log_cap)
        # Tokens (is_level token) or rows (sequence) with the weight above / below the cap.
        unit_lw, unit_on = (log_w, on) if p.is_level == "token" else (log_w[:, 0], np.ones(B, bool))
        diag["is_over"] = int((unit_on & (unit_lw > log_cap)).sum())
        diag["is_under"] = int((unit_on & (unit_lw < log_cap)).sum())
    diag["empty_rows"] = int((np.sum(mask, axis=1) == 0).sum())
    # Masked tokens contribute nothing: a non-finite per_token_loss there
    # (an overflowing ratio at a padding position) does not reach the loss.
    with np.errstate(invalid="ignore"):
        loss = float(np.sum(np.where(g != 0, g * ptl, 0.0)))
    return {"per_token_loss": ptl, "loss": loss, "coef_logp": coef, "coef_H": coef_H, "g": g,
            "is_weight": w, "frozen": sg, "diag": diag, "margins": margins}


_LOWVAR_ROOTS: list = []


def lowvar_k_margin(d: np.ndarray) -> np.ndarray:
    """Distance in d units to the two points where e^d - d - 1 = LOWVAR_K."""
    if not _LOWVAR_ROOTS:
        for x in (3.0, -11.0):                       # Newton on f(d) = e^d - d - 1 - K
            for _ in range(60):
                x -= (np.exp(x) - x - 1.0 - LOWVAR_K) / (np.exp(x) - 1.0)
            _LOWVAR_ROOTS.append(float(x))
    return np.minimum(np.abs(d - _LOWVAR_ROOTS[0]), np.abs(d - _LOWVAR_ROOTS[1]))


# ---------------------------------------------------------------------------------------
# Whole kernels.

def grpo(z, inputs: dict, p: Params, frozen: Optional[dict] = None) -> dict:
    """GRPO on logits z [B,T,V]: the kernel outputs (loss, per_token_loss, logp, entropy,
    lse, dlogits; float64) plus `terms` (policy_terms' dict) and `stats`."""
    z = _f64(z)
    y = np.asarray(inputs["chosen_ids"])
    if z.ndim != 3 or y.shape != z.shape[:2]:
        raise SpecError(f"logits {z.shape} / chosen_ids {y.shape}")
    if y.min() < 0 or y.max() >= z.shape[2]:
        raise SpecError("chosen_ids outside [0, V)")
    st = vocab_stats(z, y, p)
    t = policy_terms(st["logp"], st["entropy"], inputs, p, frozen)
    tau = float(p.temperature)
    onehot = np.zeros_like(z)
    np.put_along_axis(onehot, y[..., None].astype(np.int64), 1.0, -1)
    # d logp / d z_v = (1[v=y] - softmax(x)_v) / tau   (both temperature modes)
    # d H / d z_v    = -(1/tau) q_v (log q_v + H),  q = softmax(z/tau)
    dz = (t["coef_logp"] / tau)[..., None] * (onehot - st["softmax_x"])
    if p.entropy_coef != 0:
        dz = dz - (t["coef_H"] / tau)[..., None] * st["q"] * (st["log_q"] + st["entropy"][..., None])
    return {"loss": np.float64(t["loss"]), "per_token_loss": t["per_token_loss"], "logp": st["logp"],
            "entropy": st["entropy"], "lse": st["lse"], "dlogits": dz, "terms": t, "stats": st}


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a [N,K] @ b [K,M] by a fixed summation order (no BLAS: its kernels differ by CPU)."""
    out = np.zeros((a.shape[0], b.shape[1]))
    for k in range(a.shape[1]):
        out += a[:, k:k + 1] * b[k:k + 1, :]
    return out


def grpo_fused(hidden, lm_head, inputs: dict, p: Params, frozen: Optional[dict] = None) -> dict:
    """The fused LM-head kernel: logits = hidden @ lm_head, never stored by the kernel;
    outputs d_hidden [B,T,H] and d_lm_head [H,V] instead of dlogits."""
    h, w = _f64(hidden), _f64(lm_head)
    B, T, H = h.shape
    if w.shape[0] != H:
        raise SpecError(f"hidden {h.shape} / lm_head {w.shape}")
    flat = h.reshape(B * T, H)
    out = grpo(matmul(flat, w).reshape(B, T, -1), inputs, p, frozen)
    dz = out.pop("dlogits").reshape(B * T, -1)
    out["d_hidden"] = matmul(dz, w.T).reshape(B, T, H)
    out["d_lm_head"] = matmul(flat.T, dz)
    return out


OUTPUTS = ("loss", "per_token_loss", "logp", "entropy", "lse", "dlogits")
FUSED_OUTPUTS = ("loss", "per_token_loss", "logp", "entropy", "lse", "d_hidden", "d_lm_head")

"""The policy losses of three trainers as their sources compute them, in JAX (float64).

Written in tpuoff's own words from reading (file, function):
  TRL    huggingface/trl trl/trainer/grpo_trainer.py GRPOTrainer._compute_loss (the vLLM
         importance-sampling ratio from _generate_and_score_completions), defaults of
         trl/trainer/grpo_config.py GRPOConfig
  verl   volcengine/verl verl/trainer/ppo/core_algos.py compute_policy_loss_vanilla,
         compute_policy_loss_gspo, agg_loss, kl_penalty_forward ("low_var_kl"),
         verl/trainer/ppo/rollout_corr_helper.py compute_rollout_correction_weights, and
         verl/workers/actor/dp_actor.py (the default legacy actor: global_batch_info empty,
         so normalisers are the micro-batch's own; policy_loss = pg_loss + kl_loss * coef)
  Tunix  google/tunix tunix/rl/algo_core.py grpo_loss_fn, tunix/rl/common.py
         compute_kl_divergence and aggregate_loss, tunix/rl/grpo/grpo_learner.py GRPOConfig
         and the sampler_is weights of GRPOLearner._generate_and_compute_advantage

Each function maps the kernel inputs (logits [B,T,V], chosen_ids, completion_mask,
advantages [B], old_logp or None for on-policy, ref_logp, sampler_logp, the run-time
counts) and a trainer config dict to (loss, per_token_loss) as that trainer forms them;
`outputs` adds what a tpuoff kernel returns (logp, entropy, lse of logits/τ) and
d loss / d logits by jax.grad.  These are independent of tpuoff's spec: the preset test
checks that tpuoff with `--preset=NAME` reproduces them.

One deliberate difference, at masked positions only: the trainers multiply their
per-token importance-sampling weights by the mask (TRL's token modes: the log-ratio), so
their per-token loss there is 0 (or unweighted); tpuoff's per_token_loss keeps the
formula's value with the token's own weight (GRPO_SPEC.md v2 "Outputs").  Masked tokens
carry no loss and no gradient either way, so the weights here are left unmasked.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_enable_x64", True)

sg = lax.stop_gradient


def _token_logps(logits, chosen, temperature):
    """All three divide the logits by the sampling temperature before the log-softmax."""
    x = logits / temperature
    logp_all = jax.nn.log_softmax(x, axis=-1)
    logp = jnp.take_along_axis(logp_all, chosen[..., None], axis=-1)[..., 0]
    return logp, x


def _old(logp, inp):
    return sg(logp) if inp.get("old_logp") is None else inp["old_logp"]


# --------------------------------------------------------------------------------------------
# TRL

def trl(logp, inp, cfg):
    m = inp["completion_mask"]
    A = inp["advantages"][:, None]
    old = _old(logp, inp)
    log_ratio = logp - old
    if cfg.get("importance_sampling_level", "token") == "sequence":
        log_w = ((log_ratio * m).sum(-1) / jnp.maximum(m.sum(-1), 1.0))[:, None]
    else:
        log_w = log_ratio
    coef_1 = jnp.exp(log_w)
    beta = cfg.get("beta", 0.0)
    if beta != 0.0:
        d = inp["ref_logp"] - logp
        per_token_kl = jnp.exp(d) - d - 1
    eps_low = cfg.get("epsilon", 0.2)
    eps_high = cfg.get("epsilon_high") or eps_low
    coef_2 = jnp.clip(coef_1, 1 - eps_low, 1 + eps_high)
    if cfg.get("delta") is not None:
        coef_1 = jnp.minimum(coef_1, cfg["delta"])
    ptl = jnp.broadcast_to(-jnp.minimum(coef_1 * A, coef_2 * A), logp.shape)
    if cfg.get("use_vllm") and cfg.get("vllm_importance_sampling_correction", True):
        # computed at generation time from the recomputed old logps, no gradient
        diff = inp["old_logp"] - inp["sampler_logp"]
        mode = cfg.get("vllm_importance_sampling_mode", "sequence_mask")
        if mode.startswith("sequence"):
            diff = (diff * m).sum(-1, keepdims=True)
        ratio = jnp.exp(diff)
        cap = cfg.get("vllm_importance_sampling_clip_max", 3.0)
        if mode.endswith("truncate"):
            ratio = jnp.minimum(ratio, cap)
        else:
            ratio = jnp.where(ratio > cap, 0.0, ratio)
        ptl = ptl * sg(ratio)
    if beta != 0.0:
        ptl = ptl + beta * per_token_kl
    loss_type = cfg.get("loss_type", "dapo")
    if loss_type == "grpo":
        loss = ((ptl * m).sum(-1) / jnp.maximum(m.sum(-1), 1.0)).mean()
    elif loss_type == "dr_grpo":
        loss = (ptl * m).sum() / (ptl.shape[0] * cfg.get("max_completion_length", 512))
    elif loss_type == "dapo":
        loss = (ptl * m).sum() / jnp.maximum(inp["num_items_in_batch"], 1.0)
    else:
        raise ValueError(loss_type)
    return loss, ptl


# --------------------------------------------------------------------------------------------
# verl

def _verl_agg(mat, m, mode):
    if mode == "token-mean":
        return (mat * m).sum() / m.sum()
    if mode == "seq-mean-token-mean":
        count = m.sum(-1)
        seq = (mat * m).sum(-1) / (count + 1e-8)
        seq_mask = (count > 0).astype(mat.dtype)
        return (seq * seq_mask).sum() / seq_mask.sum()
    raise ValueError(mode)


def verl(logp, inp, cfg):
    m = inp["completion_mask"]
    A = inp["advantages"][:, None]
    old = _old(logp, inp)
    lo = cfg.get("clip_ratio_low", 0.2)
    hi = cfg.get("clip_ratio_high", 0.2)
    mode = cfg.get("loss_agg_mode", "token-mean")
    if cfg.get("loss_mode", "vanilla") == "vanilla":
        nak = jnp.clip(logp - old, -20.0, 20.0)
        ratio = jnp.exp(nak)
        pg1 = -A * ratio
        pg2 = -A * jnp.clip(ratio, 1 - lo, 1 + hi)
        clip1 = jnp.maximum(pg1, pg2)
        pg3 = -A * cfg.get("clip_ratio_c", 3.0)
        clip2 = jnp.minimum(pg3, clip1)
        pg = jnp.where(A < 0, clip2, clip1)
        pg_mode = mode
    elif cfg["loss_mode"] == "gspo":
        nak = logp - old
        seq = (nak * m).sum(-1) / jnp.maximum(m.sum(-1), 1.0)
        log_s = logp - sg(logp) + sg(seq)[:, None]
        log_s = jnp.minimum(log_s, 10.0)
        s = jnp.exp(log_s)
        pg = jnp.maximum(-A * s, -A * jnp.clip(s, 1 - lo, 1 + hi))
        pg_mode = "seq-mean-token-mean"  # forced by compute_policy_loss_gspo
    else:
        raise ValueError(cfg["loss_mode"])
    if cfg.get("rollout_is") is not None:
        lr = inp["old_logp"] - inp["sampler_logp"]
        if cfg["rollout_is"] == "sequence":
            lr = (lr * m).sum(-1, keepdims=True)
        w = jnp.exp(jnp.clip(lr, -20.0, 20.0))
        w = jnp.minimum(w, cfg.get("rollout_is_threshold", 2.0))
        pg = pg * sg(jnp.broadcast_to(w, pg.shape))
    pg = jnp.broadcast_to(pg, logp.shape)
    loss = _verl_agg(pg, m, pg_mode)
    ptl = pg
    if cfg.get("use_kl_loss", False):
        kl = jnp.clip(inp["ref_logp"] - logp, -20.0, 20.0)
        kld = jnp.clip(jnp.exp(kl) - kl - 1, -10.0, 10.0)
        coef = cfg.get("kl_loss_coef", 0.001)
        loss = loss + coef * _verl_agg(kld, m, mode)
        ptl = ptl + coef * kld
    return loss, ptl


# --------------------------------------------------------------------------------------------
# Tunix

def tunix(logp, inp, cfg):
    m = inp["completion_mask"]
    A = inp["advantages"][:, None]
    old = _old(logp, inp)
    eps = cfg.get("epsilon", 0.2)
    eps_high = cfg.get("epsilon_high", eps)
    ratio = jnp.exp(jnp.clip(logp - old, -20.0, 20.0))
    pg = jnp.maximum(-A * ratio, -A * jnp.clip(ratio, 1 - eps, 1 + eps_high))
    if cfg.get("sampler_is") == "token":
        lr = jnp.clip(inp["old_logp"] - inp["sampler_logp"], -20.0, 20.0)
        pg = pg * sg(jnp.minimum(jnp.exp(lr), cfg.get("sampler_is_threshold", 2.0)))

    def aggregate(mat):  # "sequence-mean-token-mean": unreduced sum, non-empty-row count
        count = m.sum(-1)
        return ((mat * m).sum(-1) / jnp.maximum(count, 1.0)).sum(), (count > 0).sum()

    pg_sum, denom = aggregate(pg)
    ptl = pg
    beta = cfg.get("beta", 0.04)
    if beta != 0.0:
        kl = logp - inp["ref_logp"]  # kl_loss_mode "kl"
        kl_sum, _ = aggregate(kl)
        pg_sum = pg_sum + beta * kl_sum
        ptl = ptl + beta * kl
    return pg_sum / jnp.maximum(denom, 1.0), ptl


TRAINERS = {"trl": trl, "verl": verl, "tunix": tunix}


def outputs(trainer: str, cfg: dict, inp: dict) -> dict:
    """The kernel's outputs under `trainer`'s loss: loss, per_token_loss, logp, entropy,
    lse (of logits/τ) and dlogits = d loss / d logits (float64)."""
    tau = cfg.get("temperature", 1.0)
    fn = TRAINERS[trainer]

    def total(logits):
        logp, x = _token_logps(logits, inp["chosen_ids"], tau)
        loss, ptl = fn(logp, inp, cfg)
        return loss, (ptl, logp, x)

    (loss, (ptl, logp, x)), dlogits = jax.value_and_grad(total, has_aux=True)(inp["logits"])
    lse = jax.scipy.special.logsumexp(x, axis=-1)
    p = jax.nn.softmax(x, axis=-1)
    entropy = -(p * jax.nn.log_softmax(x, axis=-1)).sum(-1)
    return {"loss": loss, "per_token_loss": ptl, "logp": logp, "entropy": entropy, "lse": lse,
            "dlogits": dlogits}

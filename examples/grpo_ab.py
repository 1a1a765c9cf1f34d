#!/usr/bin/env python3
"""A/B of the GRPO loss inside a real JAX training step.

A small causal language model in plain JAX (token embedding, a few pre-norm
transformer blocks, an untied LM head over V >= 32768) is trained for N
GRPO-style update steps on synthetic rollouts, three times from the same
initial parameters on the same rollouts:

  jax     the loss written in JAX: logits = hidden @ lm_head, log-softmax,
          clipped ratio, k3 KL, token mean (what a JAX trainer has today);
  tpuoff  tpuoff.jax.grpo_loss(logits, ...): tpuoff's vocab-tiled kernel as the
          loss (forward and backward are tpuoff's HLO inlined into the step);
  fused   tpuoff.jax.grpo_fused_linear_loss(hidden, lm_head, ...): the LM head
          and the loss in one kernel, the [B,T,V] logits never materialised.

It prints, per variant, the compile time, the median step time, XLA's memory
analysis of the compiled train step and of the loss head alone (jax.grad of the
loss w.r.t. hidden and lm_head), and how far the loss curves are from the JAX
one. Rollouts: fixed random prompts and completions of random lengths, a
reward that prefers tokens of the lower half of the vocabulary, advantages
normalised within groups of samples of one prompt; each rollout batch gets
--updates-per-batch updates against its old log-probabilities (PPO/GRPO
style) and a KL to the initial model.

  python3 examples/grpo_ab.py                 # 100 steps, f32
  python3 examples/grpo_ab.py --dtype bf16    # LM head and loss in bf16
  python3 examples/grpo_ab.py --steps 2 --layers 1   # a smoke run (CI)
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

import tpuoff.jax as tj


@dataclass(frozen=True)
class Config:
    vocab: int = 32768
    dim: int = 128
    layers: int = 2
    heads: int = 4
    prompt: int = 16
    completion: int = 48
    prompts: int = 2        # per rollout batch
    samples: int = 4        # completions per prompt (the GRPO group)
    eps: float = 0.2
    beta: float = 0.04
    lr: float = 3e-4
    dtype: str = "f32"      # of hidden, lm_head and the logits in the loss
    block_size: int = 4096  # vocab tile of the tpuoff kernels

    @property
    def batch(self) -> int:
        return self.prompts * self.samples

    @property
    def seq(self) -> int:
        return self.prompt + self.completion


# --- the model ---------------------------------------------------------------------------

def init_params(cfg: Config, seed: int = 0) -> dict:
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 4 + 4 * cfg.layers))
    n = lambda shape, scale: scale * jax.random.normal(next(keys), shape, jnp.float32)
    d = cfg.dim
    layers = [{"attn_norm": jnp.ones(d), "qkv": n((d, 3 * d), d ** -0.5),
               "out": n((d, d), d ** -0.5), "mlp_norm": jnp.ones(d),
               "up": n((d, 4 * d), d ** -0.5), "down": n((4 * d, d), (4 * d) ** -0.5)}
              for _ in range(cfg.layers)]
    return {"embed": n((cfg.vocab, d), 1.0), "layers": layers, "norm": jnp.ones(d),
            "lm_head": n((d, cfg.vocab), d ** -0.5)}


def rms_norm(x, w):
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * w


def hidden_states(cfg: Config, params: dict, tokens):
    """[B,S] tokens -> [B,S,D] final hidden states (causal)."""
    x = params["embed"][tokens]
    b, s, d = x.shape
    h = cfg.heads
    causal = jnp.tril(jnp.ones((s, s), bool))
    for layer in params["layers"]:
        q, k, v = jnp.split(rms_norm(x, layer["attn_norm"]) @ layer["qkv"], 3, -1)
        q, k, v = (t.reshape(b, s, h, d // h) for t in (q, k, v))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // h)
        attn = jax.nn.softmax(jnp.where(causal, scores, -1e30), -1)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", attn, v).reshape(b, s, d) @ layer["out"]
        x = x + jax.nn.gelu(rms_norm(x, layer["mlp_norm"]) @ layer["up"]) @ layer["down"]
    return rms_norm(x, params["norm"])


def loss_inputs(cfg: Config, params: dict, tokens):
    """hidden [B,T,D] and lm_head [D,V] of the positions that predict tokens 1..S-1,
    in the loss dtype."""
    dt = jnp.bfloat16 if cfg.dtype == "bf16" else jnp.float32
    return (hidden_states(cfg, params, tokens)[:, :-1].astype(dt),
            params["lm_head"].astype(dt))


def token_logp(cfg: Config, params: dict, tokens):
    """log p(token t+1 | prefix) in f32 (old and reference log-probabilities)."""
    hidden, head = loss_inputs(cfg, params, tokens)
    logits = jnp.einsum("btd,dv->btv", hidden, head, preferred_element_type=jnp.float32)
    lp = jax.nn.log_softmax(logits, -1)
    return jnp.take_along_axis(lp, tokens[:, 1:, None], -1)[..., 0]


# --- the three losses --------------------------------------------------------------------

def jax_grpo_loss(cfg: Config, logits, ids, mask, adv, old_logp, ref_logp):
    """GRPO_SPEC.md (pre-softmax temperature 1, clip, k3 KL, token mean) in JAX."""
    z = logits.astype(jnp.float32)
    logp = jnp.take_along_axis(jax.nn.log_softmax(z, -1), ids[..., None], -1)[..., 0]
    ratio = jnp.exp(logp - old_logp)
    a = adv[:, None]
    clipped = jnp.clip(ratio, 1 - cfg.eps, 1 + cfg.eps)
    per_token = -jnp.minimum(ratio * a, clipped * a)
    d = ref_logp - logp
    per_token = per_token + cfg.beta * (jnp.exp(d) - d - 1)
    return jnp.sum(per_token * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def make_loss(cfg: Config, variant: str):
    """loss(params, batch) for one variant."""
    def loss(params, batch):
        tokens, mask, adv, old, ref = batch
        ids = tokens[:, 1:]
        hidden, head = loss_inputs(cfg, params, tokens)
        if variant == "fused":
            return tj.grpo_fused_linear_loss(hidden, head, ids, mask, adv, old, ref,
                                             eps_low=cfg.eps, eps_high=cfg.eps, beta=cfg.beta,
                                             block_size=cfg.block_size)[0]
        logits = jnp.einsum("btd,dv->btv", hidden, head,
                            preferred_element_type=jnp.float32).astype(hidden.dtype)
        if variant == "tpuoff":
            return tj.grpo_loss(logits, ids, mask, adv, old, ref, eps_low=cfg.eps,
                                eps_high=cfg.eps, beta=cfg.beta, block_size=cfg.block_size)[0]
        return jax_grpo_loss(cfg, logits, ids, mask, adv, old, ref)
    return loss


def make_head_loss(cfg: Config, variant: str):
    """The loss head alone, as a function of (hidden, lm_head): for memory analysis."""
    def head_loss(hidden, head, ids, mask, adv, old, ref):
        if variant == "fused":
            return tj.grpo_fused_linear_loss(hidden, head, ids, mask, adv, old, ref, beta=cfg.beta,
                                             block_size=cfg.block_size)[0]
        logits = jnp.einsum("btd,dv->btv", hidden, head,
                            preferred_element_type=jnp.float32).astype(hidden.dtype)
        if variant == "tpuoff":
            return tj.grpo_loss(logits, ids, mask, adv, old, ref, beta=cfg.beta,
                                block_size=cfg.block_size)[0]
        return jax_grpo_loss(cfg, logits, ids, mask, adv, old, ref)
    return head_loss


# --- training ----------------------------------------------------------------------------

def adam_init(params):
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    return {"m": zeros, "v": zeros, "t": jnp.zeros((), jnp.int32)}


def make_update(cfg: Config, variant: str):
    loss_fn = make_loss(cfg, variant)

    @jax.jit
    def update(params, opt, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        t = opt["t"] + 1
        m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, opt["m"], grads)
        v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, opt["v"], grads)
        step = cfg.lr * jnp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        params = jax.tree_util.tree_map(lambda p, m, v: p - step * m / (jnp.sqrt(v) + 1e-8),
                                        params, m, v)
        return params, {"m": m, "v": v, "t": t}, loss

    return update


def rollouts(cfg: Config, count: int, seed: int = 1):
    """`count` synthetic rollout batches: tokens [B,S], completion mask [B,S-1], advantages [B]."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        prompts = rng.integers(0, cfg.vocab, (cfg.prompts, cfg.prompt))
        tokens = np.concatenate([np.repeat(prompts, cfg.samples, 0),
                                 rng.integers(0, cfg.vocab, (cfg.batch, cfg.completion))], 1)
        lengths = rng.integers(cfg.completion // 4, cfg.completion + 1, cfg.batch)
        pos = np.arange(cfg.seq - 1)[None, :]
        start = cfg.prompt - 1  # position predicting the first completion token
        mask = ((pos >= start) & (pos < start + lengths[:, None])).astype(np.float32)
        low = (tokens[:, 1:] < cfg.vocab // 2).astype(np.float32)
        reward = (low * mask).sum(1) / mask.sum(1)
        groups = reward.reshape(cfg.prompts, cfg.samples)
        adv = (groups - groups.mean(1, keepdims=True)) / (groups.std(1, keepdims=True) + 1e-4)
        out.append((tokens.astype(np.int32), mask, adv.reshape(-1).astype(np.float32)))
    return out


def memory(compiled) -> dict:
    m = compiled.memory_analysis()
    return {"temp": m.temp_size_in_bytes, "argument": m.argument_size_in_bytes,
            "output": m.output_size_in_bytes}


def train(cfg: Config, variant: str, steps: int, updates_per_batch: int, data) -> dict:
    params = init_params(cfg)
    ref_params = params
    logp = jax.jit(lambda p, t: token_logp(cfg, p, t))
    update = make_update(cfg, variant)
    opt = adam_init(params)
    batches = [(jnp.asarray(t), jnp.asarray(m), jnp.asarray(a)) for t, m, a in data]
    ref = [logp(ref_params, t) for t, _, _ in batches]
    t0 = time.perf_counter()
    example = (batches[0][0], batches[0][1], batches[0][2], ref[0], ref[0])
    compiled = update.lower(params, opt, example).compile()
    compile_s = time.perf_counter() - t0
    losses, times = [], []
    for step in range(steps):
        i = step // updates_per_batch
        tokens, mask, adv = batches[i]
        if step % updates_per_batch == 0:
            old = logp(params, tokens)  # the policy that produced the rollouts
        t = time.perf_counter()
        params, opt, loss = compiled(params, opt, (tokens, mask, adv, old, ref[i]))
        loss = float(loss)  # waits for the step
        times.append(time.perf_counter() - t)
        losses.append(loss)
    return {"variant": variant, "losses": losses, "compile_s": compile_s,
            "step_s": statistics.median(times[1:] if len(times) > 1 else times),
            "train_step_memory": memory(compiled)}


def head_memory(cfg: Config, variant: str) -> dict:
    dt = jnp.bfloat16 if cfg.dtype == "bf16" else jnp.float32
    b, t = cfg.batch, cfg.seq - 1
    sds = jax.ShapeDtypeStruct
    avals = (sds((b, t, cfg.dim), dt), sds((cfg.dim, cfg.vocab), dt), sds((b, t), jnp.int32),
             sds((b, t), jnp.float32), sds((b,), jnp.float32), sds((b, t), jnp.float32),
             sds((b, t), jnp.float32))
    f = jax.jit(jax.grad(make_head_loss(cfg, variant), argnums=(0, 1)))
    return memory(f.lower(*avals).compile())


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--updates-per-batch", type=int, default=2)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--variants", default="jax,tpuoff,fused")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    cfg = Config(vocab=args.vocab, layers=args.layers, dtype=args.dtype)
    data = rollouts(cfg, -(-args.steps // args.updates_per_batch))
    print(f"model: V={cfg.vocab} D={cfg.dim} layers={cfg.layers} heads={cfg.heads}; "
          f"batch {cfg.batch} x {cfg.seq - 1} predicted tokens; {args.steps} steps "
          f"({args.updates_per_batch} per rollout batch); loss dtype {cfg.dtype}; "
          f"{jax.devices()[0].platform} x{len(jax.devices())}", flush=True)
    results = []
    for variant in args.variants.split(","):
        r = train(cfg, variant, args.steps, args.updates_per_batch, data)
        r["head_memory"] = head_memory(cfg, variant)
        results.append(r)
        m, h = r["train_step_memory"], r["head_memory"]
        print(f"{variant:7s} compile {r['compile_s']:6.2f} s  step {1e3 * r['step_s']:8.1f} ms  "
              f"train step temp {mib(m['temp'])} (args {mib(m['argument'])})  "
              f"loss head grad temp {mib(h['temp'])}  "
              f"loss {r['losses'][0]:+.6f} -> {r['losses'][-1]:+.6f}", flush=True)
    base = np.asarray(results[0]["losses"])
    scale = max(float(np.max(np.abs(base))), 1e-12)
    for r in results[1:]:
        diff = np.abs(np.asarray(r["losses"]) - base)
        r["max_abs_diff"] = float(diff.max())
        r["max_rel_diff"] = float(diff.max() / scale)
        print(f"{r['variant']} vs {results[0]['variant']}: max |loss difference| over "
              f"{len(base)} steps {r['max_abs_diff']:.3g} ({r['max_rel_diff']:.3g} of max |loss|)")
    summary = {"config": cfg.__dict__, "steps": args.steps, "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return summary


if __name__ == "__main__":
    main()

"""Ordinary JAX programs for the HLO corpus (jax_corpus.py): models, losses,
optimisers, convolutions, sorting, control flow, random numbers, dtypes and
sharded programs. Each is small enough to run in well under a second."""
import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import corpus_programs_audit
import corpus_programs_linalg
import corpus_programs_more


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable
    make_args: Callable[[], tuple]
    jit_kwargs: dict = dataclasses.field(default_factory=dict)
    sharded: bool = False
    rtol: float = 2e-5
    atol: float = 2e-5
    exact: bool = False  # integer / permutation results: bit-exact
    x64: bool = False
    # Not supported yet: tpuoff must refuse every form with an error matching
    # this regular expression (and the check fails once it stops doing so).
    unsupported: str = ""
    # Also lower for TPU (tpu.hlo: cholesky / triangular-solve opcodes and
    # XLA's Qr / Eigh / LuDecomposition custom-calls where CPU has LAPACK
    # ones) and check it against the CPU outputs (programs whose outputs
    # do not depend on the algorithm: not raw eigen/singular vectors).
    tpu_form: bool = False
    # Outputs drawn by XLA's `rng` opcode: {index: (low, high)}. XLA keys
    # them with a random value chosen at compile time, so only the optimised
    # forms (key baked in as a constant) match bit for bit; the others are
    # checked to be uniform in [low, high).
    random: dict = dataclasses.field(default_factory=dict)


def rng(seed):
    return np.random.default_rng(seed)


def normal(seed, *shape, dtype=np.float32, scale=1.0):
    return (rng(seed).standard_normal(shape) * scale).astype(dtype)


# ---------------------------------------------------------------- models


def layer_norm(x, g, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * lax.rsqrt(v + eps) * g + b


def attention(x, wq, wk, wv, wo, heads):
    b, t, d = x.shape
    hd = d // heads
    q = (x @ wq).reshape(b, t, heads, hd)
    k = (x @ wk).reshape(b, t, heads, hd)
    v = (x @ wv).reshape(b, t, heads, hd)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(hd)
    mask = jnp.tril(jnp.ones((t, t), bool))
    s = jnp.where(mask, s, -1e9)
    p = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, t, d)
    return o @ wo


def transformer_block(params, x):
    h = x + attention(layer_norm(x, params["g1"], params["b1"]), params["wq"], params["wk"],
                      params["wv"], params["wo"], heads=2)
    m = jax.nn.gelu(layer_norm(h, params["g2"], params["b2"]) @ params["w1"], approximate=False)
    return h + m @ params["w2"]


def block_params(seed, d=16, f=32):
    keys = ["wq", "wk", "wv", "wo"]
    p = {k: normal(seed + i, d, d, scale=0.2) for i, k in enumerate(keys)}
    p.update(g1=np.ones(d, np.float32), b1=np.zeros(d, np.float32),
             g2=normal(seed + 9, d, scale=0.1) + 1, b2=normal(seed + 10, d, scale=0.1),
             w1=normal(seed + 11, d, f, scale=0.2), w2=normal(seed + 12, f, d, scale=0.2))
    return p


def transformer_fwd_bwd(params, x):
    def loss(p):
        return (transformer_block(p, x) ** 2).mean()
    return jax.value_and_grad(loss)(params)


def lm_loss(logits, labels):
    logp = jax.nn.log_softmax(logits, axis=-1)
    nll = -jnp.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]
    return nll.mean(), jax.grad(lambda l: -jnp.take_along_axis(
        jax.nn.log_softmax(l, -1), labels[..., None], -1).mean())(logits)


def kv_decode(cache_k, cache_v, wq, x0):
    steps = 6

    def body(i, carry):
        ck, cv, x = carry
        q = x @ wq
        ck = lax.dynamic_update_slice(ck, q[:, None, :], (0, i, 0))
        cv = lax.dynamic_update_slice(cv, jnp.tanh(q)[:, None, :], (0, i, 0))
        s = jnp.einsum("bd,btd->bt", q, ck)
        s = jnp.where(jnp.arange(ck.shape[1])[None, :] <= i, s, -jnp.inf)
        p = jax.nn.softmax(s, -1)
        x = jnp.einsum("bt,btd->bd", p, cv)
        return ck, cv, x
    return lax.fori_loop(0, steps, body, (cache_k, cache_v, x0))


def adamw(params, grads, m, v, step):
    b1, b2, lr, wd, eps = 0.9, 0.999, 1e-3, 0.01, 1e-8

    def upd(p, g, m, v):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mh = m / (1 - b1 ** step)
        vh = v / (1 - b2 ** step)
        return p - lr * (mh / (jnp.sqrt(vh) + eps) + wd * p), m, v
    out = jax.tree_util.tree_map(upd, params, grads, m, v)
    return out


# ---------------------------------------------------------------- CNN


def cnn(params, x):
    dn = ("NHWC", "HWIO", "NHWC")
    y = lax.conv_general_dilated(x, params["c1"], (1, 1), "SAME", dimension_numbers=dn)
    y = jax.nn.relu(y + params["b1"])
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = lax.conv_general_dilated(y, params["c2"], (2, 2), ((1, 1), (1, 1)), dimension_numbers=dn)
    y = jax.nn.relu(y)
    y = lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "SAME") / 4.0
    y = y.mean(axis=(1, 2))
    return y @ params["w"]


def cnn_params(seed):
    return {"c1": normal(seed, 3, 3, 3, 8, scale=0.3), "b1": normal(seed + 1, 8, scale=0.1),
            "c2": normal(seed + 2, 3, 3, 8, 8, scale=0.2), "w": normal(seed + 3, 8, 5, scale=0.3)}


def cnn_fwd_bwd(params, x, labels):
    def loss(p):
        logits = cnn(p, x)
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1).mean()
    return jax.value_and_grad(loss)(params)


def conv_zoo(x, w, wd, x1, w1, x3, w3):
    nchw = ("NCHW", "OIHW", "NCHW")
    a = lax.conv_general_dilated(x, w, (2, 1), ((1, 2), (0, 1)), rhs_dilation=(1, 2),
                                 dimension_numbers=nchw)
    # transposed convolution (lhs dilation)
    b = lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=nchw)
    # depthwise
    c = lax.conv_general_dilated(x, wd, (1, 1), "SAME", feature_group_count=x.shape[1],
                                 dimension_numbers=nchw)
    # 1-D (NWC) and 3-D convolutions
    d = lax.conv_general_dilated(x1, w1, (1,), "VALID", dimension_numbers=("NWC", "WIO", "NWC"))
    e = lax.conv_general_dilated(x3, w3, (1, 1, 1), "SAME",
                                 dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))
    return a, b, c, d, e


def conv_grads(x, w, wd):
    nchw = ("NCHW", "OIHW", "NCHW")

    def f(x, w, wd):
        y = lax.conv_general_dilated(x, w, (2, 2), "SAME", rhs_dilation=(1, 1),
                                     dimension_numbers=nchw)
        z = lax.conv_general_dilated(x, wd, (1, 1), ((1, 1), (1, 1)),
                                     feature_group_count=x.shape[1], rhs_dilation=(2, 2),
                                     dimension_numbers=nchw)
        return (jnp.sin(y) ** 2).sum() + (z * z).sum()
    return jax.grad(f, argnums=(0, 1, 2))(x, w, wd)


# ---------------------------------------------------------------- sorting


def sorting(x, keys, vals):
    s = jnp.sort(x, axis=-1)
    a = jnp.argsort(x, axis=-1)
    sd = jnp.argsort(-x, axis=0, stable=True)
    tv, ti = lax.top_k(x, 3)
    med = jnp.median(x, axis=-1)
    k2, v2 = lax.sort((keys, vals), num_keys=1, is_stable=True)
    return s, a, sd, tv, ti, med, k2, v2


def permute(key_data, x):
    key = jax.random.wrap_key_data(key_data)
    return jax.random.permutation(key, x), jax.random.permutation(key, 10)


# ---------------------------------------------------------------- control flow


def rnn_scan(w, u, xs, h0):
    def cell(h, x):
        h = jnp.tanh(h @ w + x @ u)
        return h, h * 2.0
    return lax.scan(cell, h0, xs)


def cond_while(x, n):
    y = lax.cond(x.sum() > 0, lambda v: jnp.sin(v), lambda v: jnp.cos(v) * 2, x)

    def cond(c):
        i, v = c
        return (i < n) & (v.sum() < 100.0)

    def body(c):
        i, v = c
        return i + 1, v * 1.5 + 0.25
    i, z = lax.while_loop(cond, body, (jnp.int32(0), y))
    sw = lax.switch(jnp.clip(n, 0, 2), [lambda v: v + 1, lambda v: v * 3, jnp.exp], z)
    return i, z, sw


def scan_stack(xs, w):
    # The stacked output is written with dynamic-update-slice per step.
    def step(c, x):
        c = jnp.tanh(c * 0.5 + x @ w)
        return c, c
    return lax.scan(step, jnp.zeros((xs.shape[1], w.shape[1]), xs.dtype), xs)[1]


# ---------------------------------------------------------------- random


def random_ops(key_data):
    key = jax.random.wrap_key_data(key_data)
    k = jax.random.split(key, 6)
    return (jax.random.normal(k[0], (4, 8)), jax.random.uniform(k[1], (16,)),
            jax.random.bernoulli(k[2], 0.3, (32,)),
            jax.random.truncated_normal(k[3], -2.0, 2.0, (4, 4)),
            jax.random.categorical(k[4], jnp.log(jnp.arange(1.0, 6.0)), shape=(12,)),
            jax.random.randint(k[5], (10,), 0, 100))


# ---------------------------------------------------------------- cases


def programs():
    key = np.asarray(jax.random.key_data(jax.random.key(7)))
    cases = [
        Case("transformer_fwd_bwd", transformer_fwd_bwd,
             lambda: (block_params(1), normal(2, 2, 8, 16)), rtol=1e-4, atol=1e-5),
        Case("lm_loss", lm_loss,
             lambda: (normal(3, 2, 6, 50, scale=3.0),
                      rng(4).integers(0, 50, (2, 6)).astype(np.int32)), rtol=1e-5, atol=1e-6),
        Case("kv_decode", kv_decode,
             lambda: (np.zeros((2, 8, 16), np.float32), np.zeros((2, 8, 16), np.float32),
                      normal(5, 16, 16, scale=0.3), normal(6, 2, 16)), rtol=1e-4, atol=1e-5),
        Case("adamw", adamw,
             lambda: ({"a": normal(7, 4, 8), "b": normal(8, 8)},
                      {"a": normal(9, 4, 8), "b": normal(10, 8)},
                      {"a": normal(11, 4, 8, scale=0.1), "b": normal(12, 8, scale=0.1)},
                      {"a": np.abs(normal(13, 4, 8)) * 0.01, "b": np.abs(normal(14, 8)) * 0.01},
                      np.float32(3.0))),
        Case("cnn_fwd_bwd", cnn_fwd_bwd,
             lambda: (cnn_params(20), normal(21, 2, 8, 8, 3),
                      np.array([1, 4], np.int32)), rtol=1e-4, atol=1e-5),
        Case("conv_zoo", conv_zoo,
             lambda: (normal(22, 2, 4, 7, 6), normal(23, 5, 4, 3, 2),
                      normal(24, 4, 1, 3, 3), normal(25, 2, 9, 3), normal(26, 3, 3, 4),
                      normal(27, 1, 4, 5, 3, 2), normal(28, 2, 3, 2, 2, 3)),
             rtol=1e-4, atol=1e-4),
        Case("conv_grads", conv_grads,
             lambda: (normal(29, 2, 3, 8, 7), normal(30, 4, 3, 3, 3), normal(31, 3, 1, 3, 3)),
             rtol=1e-4, atol=1e-4),
        Case("sorting", sorting,
             lambda: (normal(32, 5, 9), rng(33).integers(0, 4, 12).astype(np.int32),
                      normal(34, 12)), exact=True),
        Case("permutation", permute, lambda: (key, np.arange(20, dtype=np.float32)),
             exact=True),
        Case("rnn_scan", rnn_scan,
             lambda: (normal(35, 8, 8, scale=0.4), normal(36, 4, 8, scale=0.4),
                      normal(37, 10, 3, 4), np.zeros((3, 8), np.float32)),
             rtol=1e-4, atol=1e-5),
        Case("cond_while", cond_while, lambda: (normal(38, 6), np.int32(2)), rtol=1e-5),
        Case("scan_stack", scan_stack,
             lambda: (normal(39, 50, 16, 16, scale=0.5), normal(40, 16, 256, scale=0.2)),
             rtol=1e-4, atol=1e-5),
        Case("random_ops", random_ops, lambda: (key,), rtol=1e-5, atol=1e-6),
    ]
    return (cases + corpus_programs_more.programs(Case, normal, rng, mlp_helpers={
        "transformer_block": transformer_block, "block_params": block_params})
            + corpus_programs_linalg.programs(Case, normal, rng)
            + corpus_programs_audit.programs(Case, normal, rng))

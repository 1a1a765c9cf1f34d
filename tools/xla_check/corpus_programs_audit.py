"""Corpus programs (continued): what an audit of XLA's opcode list against
jax 0.10.2 found jitted programs contain besides the rest of the corpus --
ragged and grouped dots, reduce_precision, approximate top-k (XLA:CPU's TopK
custom-call), rematerialisation (opt-barrier), composites, scans written with
associative_scan / cumulative ops (reduce-window), lax.map, fused attention,
the gamma-family samplers, special functions, and the set / search /
histogram helpers (sort, while loops, scatters)."""
import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
from jax import lax


def grouped_dots(x, w, sizes, y):
    # Mixture-of-experts style ragged dot, and reduce_precision as quantisation
    # simulators use it.
    out = lax.ragged_dot(x, w, sizes)
    return out, lax.reduce_precision(y, exponent_bits=5, mantissa_bits=10), \
        lax.reduce_precision(y, exponent_bits=8, mantissa_bits=7)


def approximate_topk(scores):
    v, i = lax.approx_max_k(scores, 4)
    mv, mi = lax.approx_min_k(scores, 2, reduction_dimension=0)
    return v, i, mv, mi


def remat_and_composite(x, w):
    def layer(h):
        return jnp.tanh(h @ w) + h
    loss = lambda h: jax.checkpoint(layer)(jax.checkpoint(layer)(h)).sum()  # noqa: E731
    scaled = lax.composite(lambda a, b: a * b + 1.0, "tpuoff.scale_add", version=1)(x, 2.0)
    return jax.grad(loss)(x), scaled


def scans(x, t):
    csum = lax.associative_scan(jnp.add, x, axis=1)
    cmax = lax.associative_scan(jnp.maximum, x, axis=0, reverse=True)
    return (csum, cmax, lax.cumlogsumexp(x, axis=1), lax.cummin(x, axis=0),
            lax.cumsum(x, axis=1, reverse=True), lax.map(lambda r: jnp.sin(r) * r.sum(), x),
            jnp.searchsorted(jnp.sort(t), x[0]), jnp.digitize(x[1], jnp.sort(t)))


def attention(q, k, v):
    plain = jax.nn.dot_product_attention(q, k, v)
    causal = jax.nn.dot_product_attention(q, k, v, is_causal=True)
    return plain, causal, jax.grad(lambda a: jax.nn.dot_product_attention(a, k, v).sum())(q)


def gamma_family(key_data, conc):
    key = jax.random.wrap_key_data(key_data)
    k = jax.random.split(key, 5)
    return (jax.random.gamma(k[0], conc), jax.random.beta(k[1], conc, 2.0),
            jax.random.dirichlet(k[2], conc[0]), jax.random.poisson(k[3], conc * 3),
            jax.random.t(k[4], 3.0, (5,)))


def special(x):
    y = x + 0.5
    return (lax.igamma(y + 1, y), lax.igammac(y + 1, x), lax.lgamma(y), lax.digamma(y),
            lax.bessel_i0e(x), lax.bessel_i1e(x), jss.polygamma(1, y), jss.zeta(y + 2, 1.0),
            jss.betainc(y, 1.5, x / (x + 1)), jss.gammaln(y), jss.xlogy(x, y), jss.i0(x),
            jss.ndtri(x / (x + 1)), jss.expit(x), jss.logsumexp(x), jss.entr(x / 4),
            jss.log_ndtr(x), jss.erfc(x))


def set_ops(x, t):
    u, counts = jnp.unique(jnp.round(x), size=6, fill_value=0, return_counts=True)
    nz = jnp.nonzero(x > 0.5, size=5, fill_value=-1)
    hist, edges = jnp.histogram(x, bins=4)
    return (u, counts, *nz, hist, edges, jnp.interp(x, jnp.sort(t), jnp.sort(t) ** 2),
            jnp.convolve(x[0], x[1]), jnp.correlate(x[0], x[1], mode="same"),
            jnp.polyval(x[0], x[1]), jnp.kron(x[:2, :2], x[:2, :2]),
            jnp.linalg.matrix_power(x[:, :4], 3), jnp.isin(jnp.round(x), jnp.arange(3.0)))


def programs(Case, normal, rng):
    key = np.asarray(jax.random.key_data(jax.random.key(3)))
    return [
        Case("grouped_dots", grouped_dots,
             lambda: (normal(300, 8, 4), normal(301, 2, 4, 3), np.array([3, 5], np.int32),
                      normal(302, 6) * 100), rtol=1e-5, atol=1e-5),
        Case("approximate_topk", approximate_topk, lambda: (normal(303, 4, 16),), exact=True),
        Case("remat_and_composite", remat_and_composite,
             lambda: (normal(304, 4, 8), normal(305, 8, 8, scale=0.3)), rtol=1e-5, atol=1e-5),
        Case("scans", scans, lambda: (normal(306, 4, 8), normal(307, 10)), rtol=1e-5,
             atol=1e-5),
        Case("attention", attention,
             lambda: (normal(308, 1, 6, 2, 4), normal(309, 1, 6, 2, 4), normal(310, 1, 6, 2, 4)),
             rtol=1e-5, atol=1e-5),
        Case("gamma_family", gamma_family,
             lambda: (key, np.abs(normal(311, 3, 4)) + 0.5), rtol=1e-4, atol=1e-5),
        Case("special_functions", special, lambda: (np.abs(normal(312, 12)) + 0.1,),
             rtol=1e-4, atol=1e-5),
        Case("set_ops", set_ops, lambda: (normal(313, 4, 8), normal(314, 10)), rtol=1e-5,
             atol=1e-5),
    ]

"""Corpus programs (continued): FFTs, linear algebra (what jax.numpy.linalg
and jax.scipy.linalg lower to on CPU: jaxlib's LAPACK custom-calls; on TPU:
the cholesky and triangular-solve opcodes), and random numbers from the
rng-bit-generator and rng opcodes (jax.random with impl='rbg' and
'unsafe_rbg', lax.rng_bit_generator, lax.rng_uniform)."""
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax


# ---------------------------------------------------------------- FFT


def spectra(signal, field, volume):
    # 1-D, 2-D and 3-D transforms as a signal-processing user writes them.
    f = jnp.fft.fft(signal)
    back = jnp.fft.ifft(f * jnp.exp(-0.1j * jnp.arange(signal.shape[-1])))
    r = jnp.fft.rfft(signal.real, n=16)
    smooth = jnp.fft.irfft(r * jnp.exp(-jnp.arange(r.shape[-1]) / 4.0), n=16)
    f2 = jnp.fft.fft2(field)
    fn = jnp.fft.fftn(volume)
    lowpass = jnp.fft.irfftn(jnp.fft.rfftn(volume.real)[..., :3], s=volume.shape)
    power = jnp.abs(jnp.fft.fftshift(f2)) ** 2
    return f, back, r, smooth, f2, fn, lowpass, power


def fft_convolve(x, k):
    # jax.scipy.signal's FFT convolution and a circular cross-correlation.
    full = jax.scipy.signal.fftconvolve(x, k, mode="full")
    same = jax.scipy.signal.fftconvolve(x, k, mode="same")
    corr = jnp.fft.irfft(jnp.fft.rfft(x) * jnp.conj(jnp.fft.rfft(x[::-1])), n=x.shape[0])
    return full, same, corr


def fft_f64(z, x):
    return jnp.fft.fft2(z), jnp.fft.ifftn(z), jnp.fft.irfft(jnp.fft.rfft(x)), jnp.fft.hfft(z[0])


# ---------------------------------------------------------------- linear algebra


def _spd(a):
    return a @ jnp.swapaxes(a, -1, -2).conj() + a.shape[-1] * jnp.eye(a.shape[-1], dtype=a.dtype)


def gaussian_process(x, y, xs):
    # GP regression: RBF kernel, Cholesky solve, log marginal likelihood.
    def k(a, b):
        return jnp.exp(-0.5 * ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
    kxx = k(x, x) + 0.1 * jnp.eye(x.shape[0])
    chol = jnp.linalg.cholesky(kxx)
    alpha = jsl.cho_solve((chol, True), y)
    mean = k(xs, x) @ alpha
    v = jsl.solve_triangular(chol, k(x, xs), lower=True)
    var = jnp.diag(k(xs, xs)) - (v * v).sum(0)
    logml = -0.5 * y @ alpha - jnp.log(jnp.diag(chol)).sum() - 0.5 * x.shape[0] * jnp.log(2 * jnp.pi)
    return chol, mean, var, logml


def dense_solvers(a, b):
    inv = jnp.linalg.inv(a)
    x = jnp.linalg.solve(a, b)
    sign, logdet = jnp.linalg.slogdet(a)
    det = jnp.linalg.det(a[:3, :3])
    p, l, u = jsl.lu(a)
    lu, piv = jsl.lu_factor(a)
    x2 = jsl.lu_solve((lu, piv), b)
    c = jsl.cho_factor(_spd(a))
    x3 = jsl.cho_solve(c, b)
    return inv, x, sign, logdet, det, p, l, u, piv, x2, x3


def triangular(a, b, bt):
    lo, up = jnp.tril(a), jnp.triu(a)
    return (jsl.solve_triangular(lo, b, lower=True),
            jsl.solve_triangular(up, b, lower=False, trans=1),
            jsl.solve_triangular(lo, b, lower=True, trans=2, unit_diagonal=True),
            lax.linalg.triangular_solve(up, bt, left_side=False, lower=False),
            lax.linalg.triangular_solve(lo, bt, left_side=False, lower=True, transpose_a=True))


def decompositions(a, sym):
    # Signs of eigen/singular vectors are LAPACK's; both sides run the same
    # LAPACK algorithms.
    q, r = jnp.linalg.qr(a)
    qc, rc = jnp.linalg.qr(a, mode="complete")
    w, v = jnp.linalg.eigh(sym)
    wl = jnp.linalg.eigvalsh(sym, UPLO="U")
    u, s, vt = jnp.linalg.svd(a, full_matrices=False)
    uf, sf, vtf = jnp.linalg.svd(a)
    sv = jnp.linalg.svd(a, compute_uv=False)
    return q, r, qc, rc, w, v, wl, u, s, vt, uf, sf, vtf, sv


def least_squares(a, b):
    sol, res, rank, sv = jnp.linalg.lstsq(a, b)
    return (sol, res, rank, sv, jnp.linalg.pinv(a), jnp.linalg.matrix_rank(a),
            jnp.linalg.norm(a, 2), jnp.linalg.cond(a))


def batched_linalg(a, b):
    spd = _spd(a)
    chol = jnp.linalg.cholesky(spd)
    x = jnp.linalg.solve(a, b)
    q, r = jnp.linalg.qr(a)
    w, v = jnp.linalg.eigh(spd)
    s = jnp.linalg.svd(a, compute_uv=False)
    return chol, x, q, r, w, v, s, jnp.linalg.det(a)


def linalg_f64(a, b, h):
    spd = _spd(a)
    return (jnp.linalg.cholesky(spd), jnp.linalg.solve(a, b), jnp.linalg.eigh(h),
            jnp.linalg.svd(h), jnp.linalg.inv(h), jnp.linalg.qr(h), jnp.linalg.slogdet(h),
            jsl.solve_triangular(jnp.tril(h), b.astype(h.dtype), lower=True, trans="C"))


def nonsymmetric(a, d, dl, du, rhs):
    w, v = jnp.linalg.eig(a)
    t, z = jsl.schur(a)
    h, qh = jsl.hessenberg(a, calc_q=True)
    q, r, piv = jsl.qr(a, pivoting=True)
    tri = lax.linalg.tridiagonal_solve(dl, d, du, rhs)
    ex = jsl.expm(a * 0.1)
    return w, v, t, z, h, qh, q, r, piv, tri, ex


# ---------------------------------------------------------------- random bits


def rbg_keys(seed):
    # jax.random with the rng-bit-generator based PRNG implementations.
    out = []
    for impl in ("rbg", "unsafe_rbg"):
        key = jax.random.key(seed, impl=impl)
        k1, k2, k3 = jax.random.split(key, 3)
        out += [jax.random.normal(k1, (4, 6)), jax.random.uniform(k2, (7,)),
                jax.random.randint(k3, (5,), 0, 10), jax.random.bits(k1, (3,), jnp.uint8),
                jax.random.permutation(k2, 12), jax.random.bernoulli(k3, 0.3, (9,)),
                jax.random.key_data(jax.random.fold_in(key, 7))]
    return tuple(out)


def bit_generators(key):
    out = []
    for alg in (lax.RandomAlgorithm.RNG_DEFAULT, lax.RandomAlgorithm.RNG_PHILOX,
                lax.RandomAlgorithm.RNG_THREE_FRY):
        for shape, dt in (((3, 5), jnp.uint32), ((7,), jnp.uint8), ((2, 3, 2), jnp.uint16),
                          ((), jnp.uint32)):
            new_key, bits = lax.rng_bit_generator(key, shape, dtype=dt, algorithm=alg)
            out += [new_key, bits]
    return tuple(out)


def rng_ops(x):
    # lax.rng_uniform: XLA's `rng` opcode (a stateful generator).
    u = lax.rng_uniform(jnp.float32(-1), jnp.float32(3), (64,))
    n = lax.rng_uniform(jnp.int32(5), jnp.int32(105), (40,))
    return u, n, lax.rng_uniform(jnp.float32(0), jnp.float32(1), x.shape), x * 2


# ---------------------------------------------------------------- cases


def programs(Case, normal, rng):
    def cplx(seed, *shape, dtype=np.complex64):
        return (normal(seed, *shape, dtype=np.float64) +
                1j * normal(seed + 1, *shape, dtype=np.float64)).astype(dtype)
    sq = lambda seed, n: normal(seed, n, n) + n * np.eye(n, dtype=np.float32)  # noqa: E731
    sym = lambda seed, n: (lambda m: (m + m.T) / 2)(normal(seed, n, n))  # noqa: E731
    key4 = np.array([11, 22, 33, 44], np.uint32)
    return [
        Case("fft_spectra", spectra,
             lambda: (cplx(100, 3, 16), cplx(102, 8, 6), cplx(104, 2, 4, 6)),
             rtol=1e-4, atol=1e-4),
        Case("fft_convolve", fft_convolve, lambda: (normal(106, 40), normal(107, 7)),
             rtol=1e-4, atol=1e-4),
        Case("fft_f64", fft_f64, lambda: (cplx(108, 6, 10, dtype=np.complex128),
                                          normal(110, 4, 9, dtype=np.float64)),
             rtol=1e-10, atol=1e-10, x64=True),
        Case("gaussian_process", gaussian_process,
             lambda: (normal(111, 12, 2), normal(112, 12), normal(113, 5, 2)),
             rtol=1e-4, atol=1e-4, tpu_form=True),
        Case("dense_solvers", dense_solvers, lambda: (sq(114, 5), normal(115, 5, 3)),
             rtol=2e-4, atol=2e-4, tpu_form=True),
        Case("triangular_solves", triangular,
             lambda: (sq(116, 5), normal(117, 5, 3), normal(118, 2, 5)),
             rtol=1e-4, atol=1e-4, tpu_form=True),
        Case("decompositions", decompositions, lambda: (normal(119, 6, 4), sym(120, 5)),
             rtol=2e-4, atol=2e-4),
        Case("least_squares", least_squares, lambda: (normal(121, 7, 4), normal(122, 7)),
             rtol=2e-4, atol=2e-4, tpu_form=True),
        Case("batched_linalg", batched_linalg, lambda: (normal(123, 3, 4, 4), normal(124, 3, 4, 2)),
             rtol=2e-4, atol=2e-4, tpu_form=True),
        Case("linalg_f64_c128", linalg_f64,
             lambda: (normal(125, 5, 5, dtype=np.float64), normal(126, 5, 2, dtype=np.float64),
                      (lambda m: m + m.conj().T + 10 * np.eye(5))(cplx(127, 5, 5, dtype=np.complex128))),
             rtol=1e-9, atol=1e-9, x64=True),
        Case("nonsymmetric", nonsymmetric,
             lambda: (normal(129, 5, 5), normal(130, 6) + 4, normal(131, 6), normal(132, 6),
                      normal(133, 6, 2)), rtol=2e-4, atol=2e-4),
        # Integer outputs (bits, randint, permutation, keys) are compared bit for
        # bit; floats within 1e-6 (erf_inv and log differ in the last ulp).
        Case("rbg_keys", rbg_keys, lambda: (np.int32(5),), rtol=1e-6, atol=1e-6),
        Case("bit_generators", bit_generators, lambda: (key4,), exact=True),
        Case("rng_uniform", rng_ops, lambda: (normal(134, 4, 3),),
             random={0: (-1.0, 3.0), 1: (5, 105), 2: (0.0, 1.0)}),
    ]

"""Bit-reproducible float64 exp and log from +, -, *, / only.

numpy's np.exp/np.log pick a SIMD implementation at run time (AVX-512 here, libm on an
AVX2-only machine): on 5% of inputs they differ by an ulp.  The test vectors must come
out byte-identical on every machine, so the reference computes its transcendentals here,
with correctly rounded elementwise arithmetic (no fused multiply-add: each numpy ufunc
call rounds once), exact range reductions (rint, frexp, ldexp) and fixed polynomials.
Accuracy: a few ulp in float64 (test_grpo_ref.py checks it against numpy), far below
the float32 the vectors are stored in.
"""
from __future__ import annotations

import math

import numpy as np

# ln 2 split so that k * LN2_HI is exact for |k| < 2^20 (LN2_HI has 21 trailing zero bits).
LN2_HI = float.fromhex("0x1.62e42fee00000p-1")
LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
INV_LN2 = 1.4426950408889634
SQRT_HALF = 0.7071067811865476
_EXP_COEFFS = [1.0 / math.factorial(n) for n in range(14)]          # Taylor, |r| <= ln2/2
_LOG_COEFFS = [1.0 / (2 * j + 1) for j in range(12)]               # 2 atanh(s) / (2s)


def exp(x) -> np.ndarray:
    """e**x elementwise; +inf above 709.78, 0 below -745.2, NaN stays NaN."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        xc = np.clip(np.nan_to_num(x, nan=0.0, posinf=709.0, neginf=-745.0), -745.0, 709.0)
        k = np.rint(xc * INV_LN2)
        r = (xc - k * LN2_HI) - k * LN2_LO            # |r| <= 0.3466
        p = np.full_like(r, _EXP_COEFFS[-1])
        for c in reversed(_EXP_COEFFS[:-1]):
            p = p * r + c
        y = np.ldexp(p, k.astype(np.int64))
        y = np.where(x > 709.782712893384, np.inf, y)
        y = np.where(x < -745.1332191019412, 0.0, y)
        return np.where(np.isnan(x), np.nan, y)


def log(x) -> np.ndarray:
    """Natural log elementwise; -inf at 0, NaN below 0, +inf at +inf."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = np.isfinite(x) & (x > 0)
        m, e = np.frexp(np.where(ok, x, 1.0))           # x = m 2^e, m in [0.5, 1)
        low = m < SQRT_HALF
        m = np.where(low, 2.0 * m, m)                   # m in [0.707, 1.414)
        e = (e - low).astype(np.float64)
        f = m - 1.0                                     # exact (Sterbenz)
        s = f / (2.0 + f)                               # |s| <= 0.1716
        z = s * s
        p = np.full_like(z, _LOG_COEFFS[-1])
        for c in reversed(_LOG_COEFFS[:-1]):
            p = p * z + c
        y = e * LN2_HI + (e * LN2_LO + 2.0 * s * p)
        y = np.where(x == 0, -np.inf, y)
        y = np.where(x == np.inf, np.inf, y)
        return np.where(ok | (x == 0) | (x == np.inf), y, np.nan)


def logsumexp(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """log sum exp over `axis`, shifted by the max (exact) for stability."""
    mx = np.max(x, axis=axis, keepdims=True)
    return (mx + log(np.sum(exp(x - mx), axis=axis, keepdims=True))).squeeze(axis)


def sigmoid(u: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-u), without overflow for large |u|."""
    u = np.asarray(u, dtype=np.float64)
    e = exp(-np.abs(u))
    return np.where(u >= 0, 1.0 / (1.0 + e), e / (1.0 + e))

"""Corpus programs written as HLO text, for opcodes no jitted JAX program
contains on CPU: the batch-norm ops (XLA:CPU expands them; jax never emits
them), cholesky and triangular-solve with every attribute combination,
rng-bit-generator with 3-word states and 64-bit outputs, get-dimension-size
and domain. jax_corpus.py runs each on XLA:CPU (parse, compile, execute) for
the reference outputs, and writes XLA's print, proto and optimised module."""
import dataclasses
import itertools
from typing import Callable

import numpy as np


@dataclasses.dataclass
class HloCase:
    name: str
    text: str
    make_args: Callable[[], tuple]  # in parameter-number order
    rtol: float = 2e-5
    atol: float = 2e-5
    exact: bool = False
    x64: bool = False


def _tuple(outs):
    return (f"  ROOT result = ({', '.join(s for _, s in outs)}) "
            f"tuple({', '.join(n for n, _ in outs)})\n}}\n")


BATCH_NORM = """HloModule batch_norm_ops

ENTRY main {
  x = f32[4,3,5]{2,1,0} parameter(0)
  scale = f32[3]{0} parameter(1)
  offset = f32[3]{0} parameter(2)
  mean = f32[3]{0} parameter(3)
  var = f32[3]{0} parameter(4)
  dy = f32[4,3,5]{2,1,0} parameter(5)
  nhwc = f32[2,3,3,4]{3,2,1,0} parameter(6)
  gamma = f32[4]{0} parameter(7)
  train = (f32[4,3,5]{2,1,0}, f32[3]{0}, f32[3]{0}) batch-norm-training(x, scale, offset), epsilon=0.001, feature_index=1
  infer = f32[4,3,5]{2,1,0} batch-norm-inference(x, scale, offset, mean, var), epsilon=0.01, feature_index=1
  grad = (f32[4,3,5]{2,1,0}, f32[3]{0}, f32[3]{0}) batch-norm-grad(x, scale, mean, var, dy), epsilon=0.001, feature_index=1
  train_nhwc = (f32[2,3,3,4]{3,2,1,0}, f32[4]{0}, f32[4]{0}) batch-norm-training(nhwc, gamma, gamma), epsilon=1e-05, feature_index=3
  y = f32[2,3,3,4]{3,2,1,0} get-tuple-element(train_nhwc), index=0
  bm = f32[4]{0} get-tuple-element(train_nhwc), index=1
  bv = f32[4]{0} get-tuple-element(train_nhwc), index=2
  back = (f32[2,3,3,4]{3,2,1,0}, f32[4]{0}, f32[4]{0}) batch-norm-grad(nhwc, gamma, bm, bv, y), epsilon=1e-05, feature_index=3
  ROOT result = ((f32[4,3,5]{2,1,0}, f32[3]{0}, f32[3]{0}), f32[4,3,5]{2,1,0}, (f32[4,3,5]{2,1,0}, f32[3]{0}, f32[3]{0}), (f32[2,3,3,4]{3,2,1,0}, f32[4]{0}, f32[4]{0}), (f32[2,3,3,4]{3,2,1,0}, f32[4]{0}, f32[4]{0})) tuple(train, infer, grad, train_nhwc, back)
}
"""


def _triangular_text():
    lines, outs = [], []
    for i, (left, lower, unit, tr) in enumerate(itertools.product(
            (True, False), (True, False), (True, False), ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"))):
        attrs = [a for a, on in (("left_side=true", left), ("lower=true", lower),
                                 ("unit_diagonal=true", unit)) if on] + [f"transpose_a={tr}"]
        shape = "f32[2,4,3]{2,1,0}" if left else "f32[2,3,4]{2,1,0}"
        lines.append(f"  ts{i} = {shape} triangular-solve(a, {'bl' if left else 'br'}), "
                     + ", ".join(attrs))
        outs.append((f"ts{i}", shape))
    for i, tr in enumerate(("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT")):
        lines.append(f"  tc{i} = c64[4,2]{{1,0}} triangular-solve(ca, cb), left_side=true, "
                     f"lower={'true' if i % 2 else 'false'}, transpose_a={tr}")
        outs.append((f"tc{i}", "c64[4,2]{1,0}"))
    lines += ["  l = f32[2,4,4]{2,1,0} cholesky(spd), lower=true",
              "  u = f32[2,4,4]{2,1,0} cholesky(spd)",
              "  cl = c64[4,4]{1,0} cholesky(hpd), lower=true",
              "  cu = c64[4,4]{1,0} cholesky(hpd)",
              "  bad = f32[2,4,4]{2,1,0} cholesky(notpd), lower=true"]
    outs += [("l", "f32[2,4,4]{2,1,0}"), ("u", "f32[2,4,4]{2,1,0}"), ("cl", "c64[4,4]{1,0}"),
             ("cu", "c64[4,4]{1,0}"), ("bad", "f32[2,4,4]{2,1,0}")]
    return ("HloModule linalg_opcodes\n\nENTRY main {\n"
            "  a = f32[2,4,4]{2,1,0} parameter(0)\n  bl = f32[2,4,3]{2,1,0} parameter(1)\n"
            "  br = f32[2,3,4]{2,1,0} parameter(2)\n  ca = c64[4,4]{1,0} parameter(3)\n"
            "  cb = c64[4,2]{1,0} parameter(4)\n  spd = f32[2,4,4]{2,1,0} parameter(5)\n"
            "  hpd = c64[4,4]{1,0} parameter(6)\n  notpd = f32[2,4,4]{2,1,0} parameter(7)\n"
            + "\n".join(lines) + "\n" + _tuple(outs))


def _rng_text():
    lines, outs = [], []
    k = 0
    for alg, state in (("rng_philox", "state3"), ("rng_default", "state3"),
                       ("rng_three_fry", "state2"), ("rng_philox", "state2")):
        sshape = "u64[3]{0}" if state == "state3" else "u64[2]{0}"
        for out in ("u64[5]{0}", "s64[2,3]{1,0}", "f32[3,3]{1,0}", "u8[7]{0}", "s16[2,5]{1,0}"):
            lines.append(f"  g{k} = ({sshape}, {out}) rng-bit-generator({state}), algorithm={alg}")
            outs.append((f"g{k}", f"({sshape}, {out})"))
            k += 1
    return ("HloModule rng_bit_generator_states\n\nENTRY main {\n"
            "  state2 = u64[2]{0} parameter(0)\n  state3 = u64[3]{0} parameter(1)\n"
            + "\n".join(lines) + "\n" + _tuple(outs))


SHAPES_AND_DOMAINS = """HloModule shapes_and_domains

ENTRY main {
  x = f32[3,7]{1,0} parameter(0)
  d = f32[3,7]{1,0} domain(x), domain={kind="sharding", entry={maximal device=0}, exit={replicated}}
  n = s32[] get-dimension-size(x), dimensions={1}
  m = s32[] get-dimension-size(d), dimensions={0}
  nf = f32[] convert(n)
  b = f32[3,7]{1,0} broadcast(nf), dimensions={}
  y = f32[3,7]{1,0} multiply(d, b)
  ROOT result = (f32[3,7]{1,0}, s32[], s32[]) tuple(y, n, m)
}
"""


def programs(normal, rng):
    def spd(seed, *shape, complex_=False):
        m = normal(seed, *shape).astype(np.float64)
        if complex_:
            m = m + 1j * normal(seed + 1, *shape)
        out = m @ np.swapaxes(m, -1, -2).conj() + shape[-1] * np.eye(shape[-1])
        return out.astype(np.complex64 if complex_ else np.float32)

    def notpd(seed):
        a = spd(seed, 2, 4, 4)
        a[1] = -a[1]
        return a

    return [
        HloCase("hlo_batch_norm", BATCH_NORM,
                lambda: (normal(200, 4, 3, 5) * 2 + 1, normal(201, 3), normal(202, 3),
                         normal(203, 3), np.abs(normal(204, 3)) + 0.5, normal(205, 4, 3, 5),
                         normal(206, 2, 3, 3, 4), normal(207, 4)), rtol=1e-4, atol=1e-4),
        HloCase("hlo_linalg_opcodes", _triangular_text(),
                lambda: (normal(210, 2, 4, 4) + 3 * np.eye(4, dtype=np.float32),
                         normal(211, 2, 4, 3), normal(212, 2, 3, 4),
                         (normal(213, 4, 4) + 1j * normal(214, 4, 4) + 3 * np.eye(4)).astype(np.complex64),
                         (normal(215, 4, 2) + 1j * normal(216, 4, 2)).astype(np.complex64),
                         spd(217, 2, 4, 4), spd(218, 4, 4, complex_=True), notpd(219)),
                rtol=1e-4, atol=1e-4),
        HloCase("hlo_rng_bit_generator", _rng_text(),
                lambda: (np.array([0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFFE], np.uint64),
                         np.array([7, 0xFFFFFFFFFFFFFFFF, 3], np.uint64)), exact=True, x64=True),
        HloCase("hlo_shapes_and_domains", SHAPES_AND_DOMAINS, lambda: (normal(220, 3, 7),),
                exact=True),
    ]

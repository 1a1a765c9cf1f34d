"""Corpus programs (continued): element types, element-wise functions and
programs sharded over 8 CPU devices (jit shardings and shard_map)."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def bf16_mlp(x, w1, w2):
    h = jax.nn.gelu(x @ w1)
    y = (h @ w2).astype(jnp.float32)
    return y, jax.nn.softmax(y, -1).astype(jnp.bfloat16), h.sum(0)


def f16_ops(x, y):
    return jnp.exp(x) * y - jnp.sqrt(jnp.abs(y)), (x * y).sum(-1), jnp.maximum(x, y)


def int8_matmul(a, b, s):
    acc = lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32)
    return acc, (acc.astype(jnp.float32) * s).round().astype(jnp.int8), a.astype(jnp.int32).sum()


def f64_ops(x, y):
    return jnp.log1p(jnp.abs(x)) @ y, jnp.cumsum(x, axis=0), jnp.linalg.norm(x)


def complex_ops(re, im, w, zin):
    z = lax.complex(re, im)
    a = z * jnp.conj(z) + z / (1 + 1j)
    b = jnp.exp(z) - jnp.sqrt(z)
    c = z @ w.astype(jnp.complex64)
    p = z ** (0.5 + 0.25j) + (z - 1) ** 2
    eq = (z == zin), (z != jnp.conj(z))
    s = z.sum(axis=1), (z * zin).sum()
    return (jnp.real(a), jnp.imag(b), jnp.abs(z), c, jnp.angle(z), p, -z, *eq, *s, zin * 2,
            jnp.tanh(z), jnp.conj(z) * 1j)


def complex128_ops(re, im, z64):
    z = lax.complex(re, im)
    return (z * z + jnp.log(z), jnp.abs(z).sum(), z.sum(), z / (z + 2j),
            z64.astype(jnp.complex128) * z[:4], jnp.expm1(z), jnp.log1p(z))


def large_constant(x):
    # A table bigger than XLA prints in its dumps: before.hlo elides it as
    # constant({...}).
    table = np.linspace(-3.0, 3.0, 96, dtype=np.float32).reshape(8, 12)
    return x * table + jnp.asarray(np.arange(8, dtype=np.float32))[:, None]


def special_fns(x, n):
    return (jnp.tan(x * 0.5), lax.population_count(n), lax.clz(n), jax.scipy.special.erf(x),
            jax.scipy.special.erfinv(jnp.tanh(x) * 0.9), jnp.cumsum(x), jnp.cumprod(x * 0.1 + 1),
            jax.nn.logsumexp(x), jnp.sinh(x), jnp.arccos(jnp.tanh(x)), jnp.round(x * 3),
            lax.cummax(x, axis=0), jnp.nextafter(x, x + 1) - x)


def int_ops(a, b):
    return (a // jnp.maximum(b, 1), a % jnp.maximum(b, 1), a >> 2, a << 1, a & b, a | b, a ^ b,
            jnp.clip(a, -3, 5), a.astype(jnp.uint8), (a.astype(jnp.uint32) * jnp.uint32(2654435761)) >> 7,
            jnp.argmax(a), jnp.bincount(jnp.abs(b) % 6, length=6))


def gathers(table, idx, upd):
    g = table[idx]
    s = table.at[idx].add(upd)
    m = table.at[idx].max(upd)
    return g, s, m, jnp.take(table, idx[::-1], axis=0).sum(1)


# ---------------------------------------------------------------- sharded


def _mesh1():
    return jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))


def _mesh2():
    return jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2)


def sharded_mlp(x, w1, w2):
    h = jax.nn.relu(x @ w1)
    return ((h @ w2) ** 2).mean(), h


def sharded_mlp_grad(x, w1, w2):
    return jax.grad(lambda a, b: sharded_mlp(x, a, b)[0], argnums=(0, 1))(w1, w2)


def smap_collectives(x, y):
    mesh = _mesh1()

    def body(a, b):
        s = lax.psum(a * 2, "x")
        g = lax.all_gather(b, "x", tiled=True)
        p = lax.ppermute(a, "x", [(i, (i + 1) % 8) for i in range(8)])
        t = lax.all_to_all(b, "x", 0, 0, tiled=True)
        r = lax.psum_scatter(b, "x", scatter_dimension=0, tiled=True)
        i = lax.axis_index("x")
        return s, g.sum(0, keepdims=True), p + i, t, r
    f = jax.shard_map(body, mesh=mesh, in_specs=(P("x"), P("x")),
                      out_specs=(P(), P(), P("x"), P("x"), P("x")), check_vma=False)
    return f(x, y)


def smap_2d(x, w):
    mesh = _mesh2()

    def body(a, b):
        y = a @ b
        return lax.psum(y, "model")
    f = jax.shard_map(body, mesh=mesh, in_specs=(P("data", "model"), P("model", None)),
                      out_specs=P("data", None))
    return f(x, w)


def _mesh24(permuted=False):
    """A 2x4 mesh ('a', 'b'); permuted: the devices in another order."""
    devices = np.array(jax.devices()[:8])
    if permuted:
        devices = devices[[3, 0, 6, 1, 7, 2, 5, 4]]
    return jax.sharding.Mesh(devices.reshape(2, 4), ("a", "b"),
                             axis_types=(AxisType.Auto,) * 2)


def _mesh222():
    return jax.make_mesh((2, 2, 2), ("p", "q", "r"), axis_types=(AxisType.Auto,) * 3)


# Collectives over some axes of 2-D and 3-D meshes: XLA:CPU's optimised
# modules write their replica groups as mesh axes with a device order
# (`mesh[...], device_ids=(...) {'b'}`) and sub-axes (`{'a':(2)2}`).
def mesh_reduce_second_axis(x):
    return x.sum(0), x.max(0), x * 2


def mesh_matmul_reduce_scatter(x, w):
    return x @ w


def mesh_relayout(x):
    return x + 1.0


def mesh_merge_axes(x):
    return x.reshape(32, 3) + 1


def mesh3d_sums(x, y):
    return x.sum(0), x.sum(1), y.sum(0), y * 3


def smap_partial_manual(x):
    """shard_map manual over 'b' only ('a' stays automatic): Shardy's open
    dimensions ({?}) and a psum whose reducer carries Sharding annotations."""
    def body(a):
        return lax.psum(a * 2, "b") + 1
    f = jax.shard_map(body, mesh=_mesh24(), in_specs=P(None, "b"), out_specs=P(),
                      axis_names={"b"})
    return f(x)


def bf16_cumulative(x, y):
    """jnp.cumsum / cummax of bf16: a window as long as the axis (XLA:CPU's
    optimised form scans with `map`). tpuoff folds in f32 and rounds once
    (the correctly rounded prefix sums); XLA's scan rounds to bf16 on the way
    (measured: up to 0.44 from the exact sums of values up to 60, hence
    atol 0.5); rounding every step instead ends the first sum at 512, not
    ~1000."""
    return jnp.cumsum(x), lax.cummax(x), jnp.cumsum(y, axis=1)


def int8_conv(x, w):
    """A quantized convolution: s8 x s8 accumulated in s32 (the emulator's
    direct loop; oneDNN's path takes float types only)."""
    return lax.conv_general_dilated(x, w, (2,), [(1, 1)], rhs_dilation=(2,),
                                    dimension_numbers=("NWC", "WIO", "NWC"),
                                    preferred_element_type=jnp.int32)


def f64_conv(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=2,
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def programs(Case, normal, rng, mlp_helpers):
    bf = ml_dtypes.bfloat16
    m1, m2 = _mesh1(), _mesh2()
    m24, mp24, m222 = _mesh24(), _mesh24(permuted=True), _mesh222()
    ns = lambda m, *spec: NamedSharding(m, P(*spec))  # noqa: E731
    tb = mlp_helpers["transformer_block"]
    return [
        Case("bf16_mlp", bf16_mlp,
             lambda: (normal(50, 4, 16).astype(bf), normal(51, 16, 32, scale=0.3).astype(bf),
                      normal(52, 32, 8, scale=0.3).astype(bf)), rtol=2e-2, atol=2e-2),
        Case("f16_ops", f16_ops,
             lambda: (normal(53, 3, 8).astype(np.float16), normal(54, 3, 8).astype(np.float16)),
             rtol=2e-3, atol=2e-3),
        Case("int8_matmul", int8_matmul,
             lambda: (rng(55).integers(-100, 100, (4, 16)).astype(np.int8),
                      rng(56).integers(-100, 100, (16, 5)).astype(np.int8),
                      np.float32(0.001)), exact=True),
        Case("f64_ops", f64_ops,
             lambda: (normal(57, 5, 5, dtype=np.float64), normal(58, 5, 3, dtype=np.float64)),
             rtol=1e-12, atol=1e-12, x64=True),
        Case("complex_ops", complex_ops,
             lambda: (normal(59, 3, 4), normal(60, 3, 4), normal(61, 4, 2),
                      (normal(86, 3, 4) + 1j * normal(87, 3, 4)).astype(np.complex64)),
             rtol=2e-5, atol=2e-5),
        Case("complex128_ops", complex128_ops,
             lambda: (normal(62, 6, dtype=np.float64), normal(63, 6, dtype=np.float64),
                      (normal(88, 4) + 1j * normal(89, 4)).astype(np.complex64)),
             rtol=1e-12, atol=1e-12, x64=True),
        Case("bf16_cumulative", bf16_cumulative,
             lambda: ((1 + 0.5 * np.sin(np.arange(1000))).astype(bf),
                      normal(101, 3, 700).astype(bf)), rtol=1e-2, atol=0.5),
        Case("int8_conv", int8_conv,
             lambda: (rng(102).integers(-128, 128, (2, 11, 4)).astype(np.int8),
                      rng(103).integers(-128, 128, (3, 4, 5)).astype(np.int8)), exact=True),
        Case("f64_conv", f64_conv,
             lambda: (normal(104, 1, 5, 6, 4, dtype=np.float64),
                      normal(105, 3, 3, 2, 6, dtype=np.float64)),
             rtol=1e-12, atol=1e-12, x64=True),
        Case("large_constant", large_constant, lambda: (normal(90, 8, 12),)),
        Case("special_fns", special_fns,
             lambda: (normal(64, 12), rng(65).integers(-2**31, 2**31 - 1, 12).astype(np.int32)),
             rtol=2e-5, atol=2e-6),
        Case("int_ops", int_ops,
             lambda: (rng(66).integers(-50, 50, 10).astype(np.int32),
                      rng(67).integers(-7, 7, 10).astype(np.int32)), exact=True),
        Case("gathers", gathers,
             lambda: (normal(68, 6, 4), np.array([0, 2, 2, 5, 1], np.int32), normal(69, 5, 4))),
        Case("sharded_mlp", sharded_mlp,
             lambda: (normal(70, 16, 8), normal(71, 8, 32, scale=0.3), normal(72, 32, 4)),
             jit_kwargs={"in_shardings": (ns(m1, "x"), ns(m1), ns(m1)),
                         "out_shardings": (ns(m1), ns(m1, "x"))},
             sharded=True, rtol=1e-4, atol=1e-5),
        Case("sharded_mlp_grad_2d", sharded_mlp_grad,
             lambda: (normal(73, 16, 8), normal(74, 8, 32, scale=0.3), normal(75, 32, 4)),
             jit_kwargs={"in_shardings": (ns(m2, "data"), ns(m2, None, "model"),
                                          ns(m2, "model", None))},
             sharded=True, rtol=1e-4, atol=1e-5),
        Case("sharded_transformer", lambda p, x: tb(p, x),
             lambda: (mlp_helpers["block_params"](80), normal(81, 8, 4, 16)),
             jit_kwargs={"in_shardings": (None, ns(m1, "x"))},
             sharded=True, rtol=1e-4, atol=1e-5),
        Case("smap_collectives", smap_collectives,
             lambda: (normal(82, 16, 4), normal(83, 64, 3)),
             jit_kwargs={"in_shardings": (ns(m1, "x"), ns(m1, "x"))}, sharded=True),
        Case("mesh_reduce_second_axis", mesh_reduce_second_axis, lambda: (normal(91, 8, 4),),
             jit_kwargs={"in_shardings": (ns(m24, "b"),),
                         "out_shardings": (ns(m24), ns(m24), ns(m24, "b"))},
             sharded=True, rtol=1e-5, atol=1e-5),
        Case("mesh_permuted_devices", mesh_reduce_second_axis, lambda: (normal(92, 8, 4),),
             jit_kwargs={"in_shardings": (ns(mp24, "b"),),
                         "out_shardings": (ns(mp24), ns(mp24), ns(mp24, "b"))},
             sharded=True, rtol=1e-5, atol=1e-5),
        Case("mesh_reduce_scatter", mesh_matmul_reduce_scatter,
             lambda: (normal(93, 8, 16), normal(94, 16, 8)),
             jit_kwargs={"in_shardings": (ns(m24, None, "b"), ns(m24, "b", None)),
                         "out_shardings": ns(m24, None, "b")},
             sharded=True, rtol=1e-5, atol=1e-5),
        Case("mesh_all_to_all", mesh_relayout, lambda: (normal(95, 8, 8),),
             jit_kwargs={"in_shardings": (ns(m24, "b", None),),
                         "out_shardings": ns(m24, None, "b")}, sharded=True),
        Case("mesh_swap_axes", mesh_relayout, lambda: (normal(96, 8, 8),),
             jit_kwargs={"in_shardings": (ns(m24, "a", "b"),),
                         "out_shardings": ns(m24, "b", "a")}, sharded=True),
        Case("mesh_merge_axes", mesh_merge_axes, lambda: (normal(97, 4, 8, 3),),
             jit_kwargs={"in_shardings": (ns(m24, "a", "b"),),
                         "out_shardings": ns(m24, ("a", "b"))}, sharded=True),
        Case("mesh3d_sums", mesh3d_sums, lambda: (normal(98, 4, 6), normal(99, 8, 3)),
             jit_kwargs={"in_shardings": (ns(m222, "q"), ns(m222, ("r", "p")))},
             sharded=True, rtol=1e-5, atol=1e-5),
        Case("mesh_smap_partial_manual", smap_partial_manual, lambda: (normal(100, 4, 8),),
             jit_kwargs={"in_shardings": (ns(m24, "a", "b"),)}, sharded=True, rtol=1e-5, atol=1e-5),
        Case("smap_2d", smap_2d, lambda: (normal(84, 8, 6), normal(85, 6, 5)),
             jit_kwargs={"in_shardings": (ns(m2, "data", "model"), ns(m2, "model", None))},
             sharded=True, rtol=1e-5, atol=1e-5),
    ]

"""tpuoff.jax inside jax.shard_map over 8 host CPU devices: every test vector
with vocab-sharded logits (vocab_axis) and with batch-sharded logits
(batch_axis), against the vectors and the unsharded call; meshes with other
axes (the collectives must run over the named axis only); the fused loss
with a vocab-sharded lm_head and a batch-sharded hidden; the entropy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import tpuoff.jax as tj
import vectors
from jax_cases import AUX, check_against_expected, extra_inputs, logits_array, value_and_grad
from test_jax_vectors import FUSED, GRPO, ids

# shard_map needs the vocab divisible by the axis: vectors whose V is not are
# padded with columns of logit -1e9 (probability exactly 0: lse, entropy, the
# chosen logit and the gradient of the real columns are unchanged; the padding
# gets gradient 0, checked).
PAD = -1e9


def mesh(shape, names):
    n = int(np.prod(shape))
    assert len(jax.devices()) >= 8, "conftest sets 8 host devices"
    return Mesh(np.array(jax.devices()[:n]).reshape(shape), names)


def pad_vocab(z, multiple):
    v = z.shape[-1]
    vp = -(-v // multiple) * multiple
    return jnp.concatenate([z, jnp.full(z.shape[:-1] + (vp - v,), PAD, z.dtype)], -1)


def spec_of(x, batch):
    """P for a [B,...] input split along B over `batch` (or replicated)."""
    return P(batch, *([None] * (np.ndim(x) - 1))) if batch and np.ndim(x) else P()


def sharded_value_and_grad(case, dtype, m, *, vocab_axis=None, batch_axis=None, **kwargs):
    """value_and_grad of grpo_loss inside shard_map over mesh `m`; logits split
    along V over vocab_axis and/or along B over batch_axis."""
    z = logits_array(case, dtype)
    v = z.shape[-1]
    if vocab_axis:
        z = pad_vocab(z, m.shape[vocab_axis])
    extras = extra_inputs(case)
    per_token = lambda x: spec_of(x, batch_axis) if np.ndim(x) >= 1 else P()
    in_specs = (P(batch_axis, None, vocab_axis), per_token(case.inputs["chosen_ids"]),
                per_token(case.inputs["completion_mask"]), per_token(case.inputs["advantages"]),
                {k: per_token(x) for k, x in extras.items()})

    def body(logits, chosen_ids, mask, adv, extra):
        def f(lg):
            return tj.grpo_loss(lg, chosen_ids, mask, adv, **extra, **case.options,
                                vocab_axis=vocab_axis, batch_axis=batch_axis, **kwargs)
        return jax.value_and_grad(f, has_aux=True)(logits)

    out_specs = ((P(), {n: P(batch_axis, None) for n in AUX}), P(batch_axis, None, vocab_axis))
    run = jax.jit(jax.shard_map(body, mesh=m, in_specs=in_specs, out_specs=out_specs))
    (loss, aux), dlogits = run(z, case.inputs["chosen_ids"], case.inputs["completion_mask"],
                               case.inputs["advantages"], extras)
    dlogits = np.asarray(dlogits.astype(jnp.float32))
    assert np.all(dlogits[..., v:] == 0), "padding columns must get zero gradient"
    return loss, aux, dlogits[..., :v]


def close_to_unsharded(case, dtype, got, **kwargs):
    loss, aux, dlogits = value_and_grad(case, dtype, **kwargs)
    tol = (1e-6, 1e-5) if dtype == "f32" else (1e-6, 8e-3)  # bf16: one rounding of dlogits
    vectors.assert_close(got[0], loss, *tol, "loss vs unsharded")
    for n in AUX:
        vectors.assert_close(got[1][n], aux[n], *tol, f"{n} vs unsharded")
    vectors.assert_close(got[2], np.asarray(dlogits, np.float32), *tol, "dlogits vs unsharded")


@pytest.mark.parametrize("case", GRPO, ids=ids(GRPO))
def test_vocab_sharded_over_8(case):
    m = mesh((8,), ("model",))
    got = sharded_value_and_grad(case, case.dtype, m, vocab_axis="model", kernel="grpo_tiled",
                                 block_size=16)
    check_against_expected(case, *got, what=f"{case.id} vocab/8")
    close_to_unsharded(case, case.dtype, got, kernel="grpo_tiled", block_size=16)


def batch_mesh(b):
    """A mesh with a batch axis dividing B and (8 devices) another axis; B=3: 3 devices."""
    for nb in (4, 2):
        if b % nb == 0:
            return mesh((nb, 8 // nb), ("data", "other")), "data"
    return mesh((b,), ("data",)), "data"


@pytest.mark.parametrize("kernel", ["grpo_reference", "grpo_tiled"])
@pytest.mark.parametrize("case", GRPO, ids=ids(GRPO))
def test_batch_sharded(case, kernel):
    m, axis = batch_mesh(case.shape["B"])
    kw = dict(kernel=kernel, block_size=16) if kernel == "grpo_tiled" else dict(kernel=kernel)
    got = sharded_value_and_grad(case, case.dtype, m, batch_axis=axis, **kw)
    check_against_expected(case, *got, what=f"{case.id} batch/{m.shape[axis]} {kernel}")
    close_to_unsharded(case, case.dtype, got, **kw)


BY_ID = {c.id.split("/", 1)[1]: c for c in GRPO}


@pytest.mark.parametrize("shape,names,axis", [
    ((2, 4), ("data", "model"), "model"),   # vocab over the minor axis
    ((4, 2), ("model", "data"), "model"),   # ... over the major axis
    ((2, 2, 2), ("a", "model", "b"), "model"),
])
def test_vocab_axis_among_other_axes(shape, names, axis):
    # The kernel's all-reduces must run over `axis` only: with logits
    # replicated over the other axes, every group computes the same result.
    case = BY_ID["grpo/medium_vocab"]
    got = sharded_value_and_grad(case, "f32", mesh(shape, names), vocab_axis=axis,
                                 kernel="grpo_tiled", block_size=128)
    check_against_expected(case, *got, what=f"mesh {shape} {names}")


def test_vocab_axis_collectives_are_the_axis_groups():
    # The lowered program: every all-reduce of the kernel carries the replica
    # groups JAX gives a psum over that axis; no partition-id is left raw.
    m = mesh((2, 4), ("data", "model"))
    case = BY_ID["grpo/medium_vocab"]
    z = pad_vocab(logits_array(case, "f32"), 4)

    def body(lg, ids_, mask, adv, old):
        ours = tj.grpo_loss(lg, ids_, mask, adv, old, vocab_axis="model", block_size=256)[0]
        return ours, jax.lax.psum(jnp.sum(lg), "model")

    lowered = jax.jit(jax.shard_map(body, mesh=m, in_specs=(P(None, None, "model"), P(), P(), P(), P()),
                                    out_specs=(P(), P()))).lower(
        z, case.inputs["chosen_ids"], case.inputs["completion_mask"], case.inputs["advantages"],
        case.inputs["old_logp"])
    text = lowered.as_text()
    groups = {line.split("replica_groups = ")[1].split(" :")[0]
              for line in text.splitlines() if "all_reduce" in line and "replica_groups" in line}
    assert groups == {"dense<[[0, 1, 2, 3], [4, 5, 6, 7]]>"}, groups
    assert "custom_call" not in text, "the kernel is inlined, not a callback"
    assert "call @tpuoff_grpo_tiled_fwd" in text


def test_batch_and_vocab_axes_together_need_2d_kernels():
    m = mesh((2, 4), ("data", "model"))
    case = BY_ID["grpo/bf16_logits"]
    with pytest.raises(NotImplementedError, match="2-D sharded kernel"):
        sharded_value_and_grad(case, "f32", m, vocab_axis="model", batch_axis="data")


def fused_inputs(case, dtype, vocab_multiple):
    """hidden, lm_head padded for a vocab split: one extra hidden unit equal to 1
    whose lm_head row is 0 on the real columns and -1e9 on padding columns, so
    the padded logits are -1e9 and the real ones unchanged."""
    h = np.asarray(case.inputs["hidden"], np.float32)
    w = np.asarray(case.inputs["lm_head"], np.float32)
    v = w.shape[1]
    vp = -(-v // vocab_multiple) * vocab_multiple
    if vp != v:
        h = np.concatenate([h, np.ones(h.shape[:2] + (1,), np.float32)], -1)
        w = np.concatenate([w, np.zeros((1, v), np.float32)], 0)
        pad = np.zeros((w.shape[0], vp - v), np.float32)
        pad[-1] = PAD
        w = np.concatenate([w, pad], 1)
    jt = jnp.bfloat16 if dtype == "bf16" else jnp.float32
    return jnp.asarray(h, jt), jnp.asarray(w, jt), vp != v


@pytest.mark.parametrize("how", ["vocab", "batch"])
@pytest.mark.parametrize("case", FUSED, ids=ids(FUSED))
def test_fused_sharded(case, how):
    if how == "vocab":
        m, vocab_axis, batch_axis = mesh((8,), ("model",)), "model", None
    else:
        (m, batch_axis), vocab_axis = batch_mesh(case.shape["B"]), None
    h, w, padded = fused_inputs(case, case.dtype, 8 if how == "vocab" else 1)
    extras = extra_inputs(case)
    per_token = lambda x: spec_of(x, batch_axis)
    in_specs = (P(batch_axis, None, None), P(None, vocab_axis), per_token(case.inputs["chosen_ids"]),
                per_token(case.inputs["completion_mask"]), per_token(case.inputs["advantages"]),
                {k: per_token(x) for k, x in extras.items()})

    def body(h_, w_, ids_, mask, adv, extra):
        def f(hh, ww):
            return tj.grpo_fused_linear_loss(hh, ww, ids_, mask, adv, **extra, **case.options,
                                             block_size=64, vocab_axis=vocab_axis,
                                             batch_axis=batch_axis)
        return jax.value_and_grad(f, argnums=(0, 1), has_aux=True)(h_, w_)

    out_specs = ((P(), {n: P(batch_axis, None) for n in AUX}),
                 (P(batch_axis, None, None), P(None, vocab_axis)))
    run = jax.jit(jax.shard_map(body, mesh=m, in_specs=in_specs, out_specs=out_specs))
    (loss, aux), (dh, dw) = run(h, w, case.inputs["chosen_ids"], case.inputs["completion_mask"],
                                case.inputs["advantages"], extras)
    hdim, v = case.inputs["lm_head"].shape
    dh = np.asarray(dh.astype(jnp.float32))[..., :hdim]
    dw = np.asarray(dw.astype(jnp.float32))
    if padded:
        assert np.all(dw[:hdim, v:] == 0)
    what = f"{case.id} fused {how}"
    vectors.assert_close(loss, case.expected["loss"], case.atol, case.rtol, f"{what} loss")
    for n in AUX:
        vectors.assert_close(aux[n], case.expected[n], case.atol, case.rtol, f"{what} {n}")
    vectors.assert_close(dh, case.expected["d_hidden"], case.atol, case.rtol, f"{what} d_hidden")
    vectors.assert_close(dw[:hdim, :v], case.expected["d_lm_head"], case.atol, case.rtol,
                         f"{what} d_lm_head")


@pytest.mark.parametrize("kernel", ["entropy_tiled", "entropy_reference"])
def test_entropy(kernel):
    case = BY_ID["grpo/temperature_pre_softmax"]
    z = logits_array(case, "f32")
    kw = dict(kernel=kernel, temperature=0.7)
    whole = jax.jit(lambda x: tj.entropy(x, **kw))(z)
    vectors.assert_close(whole, case.expected["entropy"], case.atol, case.rtol, "entropy")
    if kernel == "entropy_tiled":
        m = mesh((8,), ("model",))
        sharded = jax.jit(jax.shard_map(lambda x: tj.entropy(x, vocab_axis="model", **kw), mesh=m,
                                        in_specs=P(None, None, "model"), out_specs=P()))(
            pad_vocab(z, 8))
        vectors.assert_close(sharded, whole, 1e-6, 1e-5, "vocab-sharded entropy")
    m = mesh((3,), ("data",))
    by_batch = jax.jit(jax.shard_map(lambda x: tj.entropy(x, batch_axis="data", **kw), mesh=m,
                                     in_specs=P("data"), out_specs=P("data")))(z)
    vectors.assert_close(by_batch, whole, 0, 0, "batch-sharded entropy")
    # A metric: no gradient flows through it.
    g = jax.grad(lambda x: jnp.sum(tj.entropy(x, **kw)))(z)
    assert not np.any(np.asarray(g))

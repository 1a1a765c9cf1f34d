"""tpuoff.jax inside jax.shard_map over 8 host CPU devices: every test vector
(v1 and GRPO_SPEC v2) with vocab-sharded logits (vocab_axis), batch-sharded
logits (batch_axis), and on 2-D meshes batch and vocab or sequence and vocab
at once, against the vectors and the unsharded call; meshes with other axes
(the collectives must run over the named axes only), all three kinds at once
and several axes for one dimension; the fused loss with a vocab-sharded
lm_head, a batch-sharded hidden and both (and seq,vocab); the entropy."""
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


def axis_size(m, axis):
    """Devices along a mesh axis, or along a tuple of them."""
    names = (axis,) if isinstance(axis, str) else axis
    return int(np.prod([m.shape[a] for a in names]))


def pad_vocab(z, multiple):
    v = z.shape[-1]
    vp = -(-v // multiple) * multiple
    return jnp.concatenate([z, jnp.full(z.shape[:-1] + (vp - v,), PAD, z.dtype)], -1)


def spec_of(x, batch, seq=None):
    """P for a [B], [B,T] (or [B,T,...]) input split along B over `batch` and
    along T over `seq`; scalars replicated."""
    nd = np.ndim(x)
    if nd == 0:
        return P()
    return P(batch, *([seq] if nd >= 2 else []), *([None] * max(nd - 2, 0)))


def pad_seq(case, multiple):
    """The case's inputs with T padded to a multiple: tokens of mask 0 (logits
    0, ids 0, other per-token inputs 0), which weigh nothing; a constant
    loss keeps dividing by the real T (max_len)."""
    t = case.inputs["chosen_ids"].shape[1]
    tp = -(-t // multiple) * multiple
    options = dict(case.options)
    if options.get("loss_type") == "constant" and options.get("max_len") is None:
        options["max_len"] = t
    if tp == t:
        return case.inputs, options, t
    inputs = {}
    for k, x in case.inputs.items():
        if np.ndim(x) >= 2 and x.shape[1] == t and k != "lm_head":
            widths = [(0, 0), (0, tp - t)] + [(0, 0)] * (np.ndim(x) - 2)
            x = np.pad(x, widths)
        inputs[k] = x
    return inputs, options, t


def sharded_value_and_grad(case, dtype, m, *, vocab_axis=None, batch_axis=None, seq_axis=None,
                           **kwargs):
    """value_and_grad of grpo_loss inside shard_map over mesh `m`; logits split
    along V over vocab_axis, along B over batch_axis and along T over
    seq_axis (T padded with mask-0 tokens when the axis does not divide it)."""
    inputs, options, t = pad_seq(case, axis_size(m, seq_axis) if seq_axis else 1)
    z = jnp.asarray(inputs["logits"], jnp.bfloat16 if dtype == "bf16" else jnp.float32)
    v = z.shape[-1]
    if vocab_axis:
        z = pad_vocab(z, axis_size(m, vocab_axis))
    extras = extra_inputs(vectors.Case(**{**case.__dict__, "inputs": inputs}))
    per_token = lambda x: spec_of(x, batch_axis, seq_axis)
    in_specs = (P(batch_axis, seq_axis, vocab_axis), per_token(inputs["chosen_ids"]),
                per_token(inputs["completion_mask"]), per_token(inputs["advantages"]),
                {k: per_token(x) for k, x in extras.items()})

    def body(logits, chosen_ids, mask, adv, extra):
        def f(lg):
            return tj.grpo_loss(lg, chosen_ids, mask, adv, **extra, **options,
                                vocab_axis=vocab_axis, batch_axis=batch_axis, seq_axis=seq_axis,
                                **kwargs)
        return jax.value_and_grad(f, has_aux=True)(logits)

    out_specs = ((P(), {n: P(batch_axis, seq_axis) for n in AUX}),
                 P(batch_axis, seq_axis, vocab_axis))
    run = jax.jit(jax.shard_map(body, mesh=m, in_specs=in_specs, out_specs=out_specs))
    (loss, aux), dlogits = run(z, inputs["chosen_ids"], inputs["completion_mask"],
                               inputs["advantages"], extras)
    dlogits = np.asarray(dlogits.astype(jnp.float32))
    assert np.all(dlogits[..., v:] == 0), "padding columns must get zero gradient"
    assert np.all(dlogits[:, t:] == 0), "padding tokens must get zero gradient"
    aux = {n: np.asarray(a)[:, :t] for n, a in aux.items()}
    return loss, aux, dlogits[:, :t, :v]


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


@pytest.mark.parametrize("case", GRPO, ids=ids(GRPO))
def test_batch_sharded(case):
    # The reference kernel over a batch axis (the tiled kernel's batch split
    # runs in test_batch_and_vocab_on_2d_mesh, beside its vocab split).
    m, axis = batch_mesh(case.shape["B"])
    kw = dict(kernel="grpo_reference")
    got = sharded_value_and_grad(case, case.dtype, m, batch_axis=axis, **kw)
    check_against_expected(case, *got, what=f"{case.id} batch/{m.shape[axis]} grpo_reference")
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


def mesh_2d(b, minor="model"):
    """A 2-D mesh of 8 devices whose major axis "data" divides the batch B
    (2x4; B = 3: 3x2, B = 5: 5x1)."""
    nb = next((n for n in (2, 4) if b % n == 0), b)
    return mesh((nb, 8 // nb), ("data", minor))


@pytest.mark.parametrize("case", GRPO, ids=ids(GRPO))
def test_batch_and_vocab_on_2d_mesh(case):
    # Batch over "data" and vocab over "model" at once: tpuoff's
    # --mesh=AxB --shard=batch,vocab module mapped onto the two JAX axes.
    m = mesh_2d(case.shape["B"])
    kw = dict(kernel="grpo_tiled", block_size=16)
    got = sharded_value_and_grad(case, case.dtype, m, batch_axis="data", vocab_axis="model", **kw)
    check_against_expected(case, *got, what=f"{case.id} batch,vocab {dict(m.shape)}")
    close_to_unsharded(case, case.dtype, got, **kw)


# Where a sequence split changes what is summed: every v2 vector (GSPO's
# sequence ratios, sequence-level IS, empty-row counts, ...) and the v1 ones
# with per-row or constant normalisers.
SEQ_CASES = [c for c in GRPO if c.path.parent.name != "grpo"
             or c.options.get("loss_type") in ("sequence_mean", "constant")]


@pytest.mark.parametrize("case", SEQ_CASES, ids=ids(SEQ_CASES))
def test_seq_and_vocab_on_2d_mesh(case):
    # Sequence over "seq" (2; T padded with mask-0 tokens when odd) and vocab
    # over "model" (4): row sums (GSPO ratios, sequence_mean, sequence-level
    # IS) run across the sequence shards.
    m = mesh((2, 4), ("seq", "model"))
    kw = dict(kernel="grpo_tiled", block_size=16)
    got = sharded_value_and_grad(case, case.dtype, m, seq_axis="seq", vocab_axis="model", **kw)
    check_against_expected(case, *got, what=f"{case.id} seq,vocab 2x4")
    close_to_unsharded(case, case.dtype, got, **kw)


@pytest.mark.parametrize("case", [BY_ID[k] for k in ("grpo/sequence_mean", "grpo/constant_norm")]
                         + [c for c in GRPO if c.path.parent.name == "grpo_v2"][:3],
                         ids=lambda c: c.id)
def test_batch_seq_vocab_and_axis_tuples(case):
    # Every kind at once on a 2x2x2 mesh whose axes JAX orders differently
    # from the kernel (vocab major), then two axes for one dimension
    # (batch over ("a", "b"), the first major).
    b = case.shape["B"]
    if b % 2 == 0:
        m = mesh((2, 2, 2), ("v", "t", "b"))
        got = sharded_value_and_grad(case, case.dtype, m, batch_axis="b", seq_axis="t",
                                     vocab_axis="v", kernel="grpo_tiled", block_size=16)
        check_against_expected(case, *got, what=f"{case.id} b,t,v 2x2x2")
    if b % 4 == 0:
        m = mesh((2, 2, 2), ("a", "b", "model"))
        got = sharded_value_and_grad(case, case.dtype, m, batch_axis=("a", "b"),
                                     vocab_axis="model", kernel="grpo_tiled", block_size=16)
        check_against_expected(case, *got, what=f"{case.id} (a,b),model 2x2x2")
    m = mesh((2, 4), ("x", "model"))
    got = sharded_value_and_grad(case, case.dtype, m, seq_axis=("x", "model"),
                                 kernel="grpo_reference")
    check_against_expected(case, *got, what=f"{case.id} seq over (x,model)")


def test_axis_named_twice():
    m = mesh((2, 4), ("data", "model"))
    case = BY_ID["grpo/medium_vocab"]
    z = logits_array(case, "f32")

    def body(lg, ids_, mask, adv):
        return tj.grpo_loss(lg, ids_, mask, adv, vocab_axis="model", batch_axis=("data", "model"))[0]

    with pytest.raises(ValueError, match="mesh axis 'model' is named twice"):
        jax.jit(jax.shard_map(body, mesh=m, in_specs=P(), out_specs=P()))(
            z, case.inputs["chosen_ids"], case.inputs["completion_mask"], case.inputs["advantages"])


def fused_inputs(inputs, dtype, vocab_multiple):
    """hidden, lm_head padded for a vocab split: one extra hidden unit equal to 1
    whose lm_head row is 0 on the real columns and -1e9 on padding columns, so
    the padded logits are -1e9 and the real ones unchanged."""
    h = np.asarray(inputs["hidden"], np.float32)
    w = np.asarray(inputs["lm_head"], np.float32)
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


def fused_mesh(case, how):
    """(mesh, batch_axis, seq_axis, vocab_axis) of a sharding of the fused tests."""
    b = case.shape["B"]
    if how == "vocab":
        return mesh((8,), ("model",)), None, None, "model"
    if how == "batch":
        m, axis = batch_mesh(b)
        return m, axis, None, None
    if how == "batch,vocab":
        return mesh_2d(b), "data", None, "model"
    assert how == "seq,vocab"
    return mesh((2, 4), ("seq", "model")), None, "seq", "model"


FUSED_RUNS = [(c, how) for c in FUSED for how in ("vocab", "batch", "batch,vocab", "seq,vocab")
              if how != "seq,vocab" or c.path.parent.name == "grpo_fused_v2"]


@pytest.mark.parametrize("case,how", FUSED_RUNS, ids=[f"{c.id}-{h}" for c, h in FUSED_RUNS])
def test_fused_sharded(case, how):
    m, batch_axis, seq_axis, vocab_axis = fused_mesh(case, how)
    inputs, options, t = pad_seq(case, axis_size(m, seq_axis) if seq_axis else 1)
    h, w, padded = fused_inputs(inputs, case.dtype, axis_size(m, vocab_axis) if vocab_axis else 1)
    extras = extra_inputs(vectors.Case(**{**case.__dict__, "inputs": inputs}))
    per_token = lambda x: spec_of(x, batch_axis, seq_axis)
    in_specs = (P(batch_axis, seq_axis, None), P(None, vocab_axis),
                per_token(inputs["chosen_ids"]), per_token(inputs["completion_mask"]),
                per_token(inputs["advantages"]), {k: per_token(x) for k, x in extras.items()})

    def body(h_, w_, ids_, mask, adv, extra):
        def f(hh, ww):
            return tj.grpo_fused_linear_loss(hh, ww, ids_, mask, adv, **extra, **options,
                                             block_size=64, vocab_axis=vocab_axis,
                                             batch_axis=batch_axis, seq_axis=seq_axis)
        return jax.value_and_grad(f, argnums=(0, 1), has_aux=True)(h_, w_)

    out_specs = ((P(), {n: P(batch_axis, seq_axis) for n in AUX}),
                 (P(batch_axis, seq_axis, None), P(None, vocab_axis)))
    run = jax.jit(jax.shard_map(body, mesh=m, in_specs=in_specs, out_specs=out_specs))
    (loss, aux), (dh, dw) = run(h, w, inputs["chosen_ids"], inputs["completion_mask"],
                                inputs["advantages"], extras)
    hdim, v = case.inputs["lm_head"].shape
    dh = np.asarray(dh.astype(jnp.float32))
    assert np.all(dh[:, t:] == 0), "padding tokens must get zero gradient"
    dh = dh[:, :t, :hdim]
    dw = np.asarray(dw.astype(jnp.float32))
    if padded:
        assert np.all(dw[:hdim, v:] == 0)
    what = f"{case.id} fused {how}"
    vectors.assert_close(loss, case.expected["loss"], case.atol, case.rtol, f"{what} loss")
    for n in AUX:
        vectors.assert_close(np.asarray(aux[n])[:, :t], case.expected[n], case.atol, case.rtol,
                             f"{what} {n}")
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
        # 2-D: batch over 3 and vocab over 2; seq over 2 (T = 4) and vocab over 4.
        for shape, names, kw2, spec in (
                ((3, 2), ("data", "model"), dict(batch_axis="data"), P("data", None, "model")),
                ((2, 4), ("seq", "model"), dict(seq_axis="seq"), P(None, "seq", "model"))):
            m = mesh(shape, names)
            got = jax.jit(jax.shard_map(
                lambda x: tj.entropy(x, vocab_axis="model", **kw2, **kw), mesh=m, in_specs=spec,
                out_specs=P(*spec[:2])))(pad_vocab(z, shape[1]))
            vectors.assert_close(got, whole, 1e-6, 1e-5, f"{names} entropy")
    m = mesh((3,), ("data",))
    by_batch = jax.jit(jax.shard_map(lambda x: tj.entropy(x, batch_axis="data", **kw), mesh=m,
                                     in_specs=P("data"), out_specs=P("data")))(z)
    vectors.assert_close(by_batch, whole, 0, 0, "batch-sharded entropy")
    # A metric: no gradient flows through it.
    g = jax.grad(lambda x: jnp.sum(tj.entropy(x, **kw)))(z)
    assert not np.any(np.asarray(g))


def _vocab_sharded_jax_loss(x, ids_, adv, old, mask, axis):
    """GRPO_SPEC's token-mean PPO-clip loss (eps 0.2, beta 0) over vocab-sharded
    logits, written in JAX with psum/pmax: what shard_map transposes itself."""
    mx = jax.lax.pmax(jax.lax.stop_gradient(jnp.max(x, -1)), axis)
    lse = jnp.log(jax.lax.psum(jnp.sum(jnp.exp(x - mx[..., None]), -1), axis)) + mx
    lo = jax.lax.axis_index(axis) * x.shape[-1]
    own = (ids_ >= lo) & (ids_ < lo + x.shape[-1])
    local = jnp.clip(ids_ - lo, 0, x.shape[-1] - 1)[..., None]
    chosen = jax.lax.psum(jnp.where(own, jnp.take_along_axis(x, local, -1)[..., 0], 0.0), axis)
    r = jnp.exp(chosen - lse - old)
    a = adv[:, None]
    return jnp.sum(mask * -jnp.minimum(r * a, jnp.clip(r, 0.8, 1.2) * a)) / jnp.sum(mask)


@pytest.mark.parametrize("check_vma", [True, False])
def test_gradients_under_check_vma_off_transpose_as_jax_does(check_vma):
    """shard_map(check_vma=False) transposes a P() output into per-device shares
    of its cotangent (ct / mesh size) and a psum into a psum of shares. Before,
    a gradient taken outside such a shard_map came out at 1/8 (1/4 for a
    lm_head split over 4 of a 2x4 mesh): the kernels' all-reduces are inside
    the custom call. Now the loss's cotangent is summed over the kernel's axes
    as for a psum, and gradients the module all-reduces (d_hidden over the
    vocab shards) are handed back as equal shares: the gradient taken outside
    equals the unsharded one, and one taken inside the body is what the same
    loss written in JAX gives (8x the per-device gradient with check_vma=False,
    JAX's own rule; 1x with it on)."""
    B, T, V, H = 8, 4, 64, 16
    r = np.random.default_rng(7)
    z = jnp.asarray(r.standard_normal((B, T, V)), jnp.float32)
    hid = jnp.asarray(r.standard_normal((B, T, H)), jnp.float32)
    w = jnp.asarray(0.3 * r.standard_normal((H, V)), jnp.float32)
    y = r.integers(0, V, (B, T)).astype(np.int32)
    mask = (r.random((B, T)) < 0.8).astype(np.float32)
    adv = r.standard_normal(B).astype(np.float32)
    old = (-np.log(V) + 0.3 * r.standard_normal((B, T))).astype(np.float32)
    tol = dict(rtol=2e-5, atol=1e-8)
    want = jax.grad(lambda x: tj.grpo_loss(x, y, mask, adv, old)[0])(z)
    want_h, want_w = jax.grad(lambda h, lm: tj.grpo_fused_linear_loss(h, lm, y, mask, adv, old)[0],
                              (0, 1))(hid, w)
    m1, m2 = mesh((8,), ("v",)), mesh((2, 4), ("d", "v"))
    vocab = P(None, None, "v")

    f = jax.shard_map(lambda x: tj.grpo_loss(x, y, mask, adv, old, vocab_axis="v")[0], mesh=m1,
                      in_specs=vocab, out_specs=P(), check_vma=check_vma)
    np.testing.assert_allclose(jax.jit(jax.grad(f))(z), want, **tol)

    f = jax.shard_map(lambda x, i, a, o, k: tj.grpo_loss(x, i, k, a, o, batch_axis="d",
                                                         vocab_axis="v")[0],
                      mesh=m2, in_specs=(P("d", None, "v"),) + (P("d"),) * 4, out_specs=P(),
                      check_vma=check_vma)
    np.testing.assert_allclose(jax.jit(jax.grad(lambda x: f(x, y, adv, old, mask)))(z), want, **tol)

    f = jax.shard_map(lambda h, lm: tj.grpo_fused_linear_loss(h, lm, y, mask, adv, old,
                                                              vocab_axis="v")[0],
                      mesh=m2, in_specs=(P(), P(None, "v")), out_specs=P(), check_vma=check_vma)
    got_h, got_w = jax.jit(jax.grad(f, (0, 1)))(hid, w)
    np.testing.assert_allclose(got_h, want_h, **tol)
    np.testing.assert_allclose(got_w, want_w, **tol)

    def inside(loss):
        return jax.jit(jax.shard_map(lambda x: jax.grad(loss)(x), mesh=m1, in_specs=vocab,
                                     out_specs=vocab, check_vma=check_vma))(z)
    in_jax = inside(lambda x: _vocab_sharded_jax_loss(x, y, adv, old, mask, "v"))
    in_tpuoff = inside(lambda x: tj.grpo_loss(x, y, mask, adv, old, vocab_axis="v")[0])
    np.testing.assert_allclose(in_jax, want * (1 if check_vma else 8), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(in_tpuoff, in_jax, rtol=1e-4, atol=1e-7)

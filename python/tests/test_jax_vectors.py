"""Every test vector through jax.value_and_grad of tpuoff.jax.grpo_loss (reference
and tiled kernels, f32 and bf16) and of grpo_fused_linear_loss, under jax.jit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpuoff
import tpuoff.jax as tj
import vectors
from jax_cases import (AUX, bf16_round, check_against_expected, extra_inputs, jax_grpo,
                       jax_math, value_and_grad)

KINDS = ["grpo"] + (["grpo_v2"] if "policy_loss" in tpuoff.kernel_option_names() else [])
GRPO = vectors.cases(*KINDS)
FUSED_KINDS = ["grpo_fused"] + (["grpo_fused_v2"] if "grpo_v2" in KINDS else [])
FUSED = vectors.cases(*FUSED_KINDS)
KERNELS = ["grpo_reference", "grpo_tiled"]
BF16_TOL = (2e-3, 2e-2)  # GRPO_SPEC.md, bf16 logits


def ids(cases):
    return [c.id for c in cases]


def test_there_are_vectors():
    assert vectors.roots(), "no tests/testdata and no ../shared/testdata"
    assert len(GRPO) >= 12 and len(FUSED) >= 3, (len(GRPO), len(FUSED))


def kernel_kwargs(kernel):
    # Small tiles so every vector has several (ragged) vocab tiles.
    return dict(kernel=kernel, block_size=16) if kernel == "grpo_tiled" else dict(kernel=kernel)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", GRPO, ids=ids(GRPO))
def test_vector(case, kernel):
    loss, aux, dlogits = value_and_grad(case, case.dtype, **kernel_kwargs(kernel))
    assert dlogits.dtype == (jnp.bfloat16 if case.dtype == "bf16" else jnp.float32)
    check_against_expected(case, loss, aux, dlogits, what=f"{case.id} {kernel}")


BF16_CASES = [c for c in GRPO if c.dtype == "bf16"]
# The bf16 re-run of f32 vectors: the v1 folder with both kernels, the v2
# folder (GRPO_SPEC v2's options) with the tiled one.
F32_RUNS = [(c, k) for c in GRPO if c.dtype == "f32" for k in KERNELS
            if c.path.parent.name == "grpo" or k == "grpo_tiled"]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", BF16_CASES, ids=ids(BF16_CASES))
def test_bf16_vector_in_f32(case, kernel):
    # bf16 vectors hold bf16-exact values: the f32 kernel meets the same expectations.
    loss, aux, dlogits = value_and_grad(case, "f32", **kernel_kwargs(kernel))
    check_against_expected(case, loss, aux, dlogits, what=f"{case.id} {kernel} f32")


def _v1_only(case):
    return set(case.options) <= set(jax_grpo.GrpoParams.__dataclass_fields__) | {
        "temperature_mode"}


@pytest.mark.parametrize("case,kernel", F32_RUNS, ids=[f"{c.id}-{k}" for c, k in F32_RUNS])
def test_f32_vector_in_bf16(case, kernel):
    """The f32 vectors with their logits rounded to bf16, in the bf16 kernel, against
    the JAX-written math (tools/xla_check/jax_grpo.py; for options it lacks: the f32
    kernel) on the same rounded logits, at the bf16 tolerance."""
    rounded = bf16_round(case.inputs["logits"])
    if _v1_only(case):
        want_loss, want_aux, want_grad = jax_math(case, rounded)
    else:
        f32_case = vectors.Case(**{**case.__dict__, "id": case.id + "@bf16-rounded",
                                   "inputs": {**case.inputs, "logits": rounded}})
        want_loss, want_aux, want_grad = value_and_grad(f32_case, "f32", kernel="grpo_reference")
    bf16_case = vectors.Case(**{**case.__dict__, "id": case.id + "@bf16-rounded",
                                    "inputs": {**case.inputs, "logits": rounded}})
    loss, aux, dlogits = value_and_grad(bf16_case, "bf16", **kernel_kwargs(kernel))
    assert dlogits.dtype == jnp.bfloat16
    atol, rtol = BF16_TOL
    what = f"{case.id} {kernel} bf16"
    vectors.assert_close(loss, want_loss, atol, rtol, f"{what} loss")
    for name in AUX:
        vectors.assert_close(aux[name], want_aux[name], atol, rtol, f"{what} {name}")
    vectors.assert_close(np.asarray(dlogits, np.float32), want_grad, atol, rtol, f"{what} dlogits")


@pytest.mark.parametrize("case", FUSED, ids=ids(FUSED))
def test_fused_vector(case):
    dtype = jnp.bfloat16 if case.dtype == "bf16" else jnp.float32
    hidden = jnp.asarray(case.inputs["hidden"], dtype)
    lm_head = jnp.asarray(case.inputs["lm_head"], dtype)

    def f(h, w, ids_, mask, adv, extras):
        return tj.grpo_fused_linear_loss(h, w, ids_, mask, adv, **extras, **case.options,
                                         block_size=64, token_chunk=7)

    g = jax.jit(jax.value_and_grad(f, argnums=(0, 1), has_aux=True))
    (loss, aux), (dh, dw) = g(hidden, lm_head, case.inputs["chosen_ids"],
                              case.inputs["completion_mask"], case.inputs["advantages"],
                              extra_inputs(case))
    assert dh.dtype == dtype and dw.dtype == dtype
    what = case.id
    vectors.assert_close(loss, case.expected["loss"], case.atol, case.rtol, f"{what} loss")
    for name in AUX:
        vectors.assert_close(aux[name], case.expected[name], case.atol, case.rtol, f"{what} {name}")
    vectors.assert_close(np.asarray(dh, np.float32), case.expected["d_hidden"], case.atol,
                         case.rtol, f"{what} d_hidden")
    vectors.assert_close(np.asarray(dw, np.float32), case.expected["d_lm_head"], case.atol,
                         case.rtol, f"{what} d_lm_head")


FUSED_BF16 = [c for c in FUSED if c.dtype == "bf16"]


@pytest.mark.parametrize("case", FUSED_BF16, ids=ids(FUSED_BF16))
def test_fused_vector_dlogits_bf16(case):
    """dlogits_dtype="bf16": the gradient products on the dlogits tile rounded to
    bf16 (Liger-Kernel's choice) still match the float64 vectors at the case's
    tolerance; the loss is the default mode's bit for bit, the gradients differ
    from it (the rounding happened) by at most 2^-7 of their largest magnitude."""
    hidden = jnp.asarray(case.inputs["hidden"], jnp.bfloat16)
    lm_head = jnp.asarray(case.inputs["lm_head"], jnp.bfloat16)

    def grads(dlogits_dtype):
        def f(h, w, ids_, mask, adv, extras):
            return tj.grpo_fused_linear_loss(h, w, ids_, mask, adv, **extras, **case.options,
                                             block_size=64, token_chunk=7,
                                             dlogits_dtype=dlogits_dtype)
        g = jax.jit(jax.value_and_grad(f, argnums=(0, 1), has_aux=True))
        return g(hidden, lm_head, case.inputs["chosen_ids"], case.inputs["completion_mask"],
                 case.inputs["advantages"], extra_inputs(case))

    (loss, aux), (dh, dw) = grads("bf16")
    (loss32, _), (dh32, dw32) = grads(None)
    what = f"{case.id} dlogits bf16"
    assert np.asarray(loss) == np.asarray(loss32), (loss, loss32)
    vectors.assert_close(loss, case.expected["loss"], case.atol, case.rtol, f"{what} loss")
    for name, got, exact in (("d_hidden", dh, dh32), ("d_lm_head", dw, dw32)):
        assert got.dtype == jnp.bfloat16
        got, exact = np.asarray(got, np.float32), np.asarray(exact, np.float32)
        vectors.assert_close(got, case.expected[name], case.atol, case.rtol, f"{what} {name}")
        assert np.max(np.abs(got - exact)) <= np.max(np.abs(exact)) * 2.0 ** -7, name
    assert np.any(np.asarray(dh, np.float32) != np.asarray(dh32, np.float32)) or \
        np.any(np.asarray(dw, np.float32) != np.asarray(dw32, np.float32))


def test_dlogits_bf16_needs_bf16_operands():
    case = next(c for c in FUSED if c.dtype == "f32")
    h = jnp.asarray(case.inputs["hidden"], jnp.float32)
    w = jnp.asarray(case.inputs["lm_head"], jnp.float32)
    with pytest.raises(ValueError, match="--dlogits-dtype=bf16 needs --logits-dtype=bf16"):
        tj.grpo_fused_linear_loss(h, w, case.inputs["chosen_ids"], case.inputs["completion_mask"],
                                  case.inputs["advantages"], **extra_inputs(case),
                                  **case.options, dlogits_dtype="bf16")

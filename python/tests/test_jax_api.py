"""tpuoff.jax API behaviour: inlining, gradients, options, errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import tpuoff.jax as tj
import vectors
from jax_cases import jax_math
from test_jax_sharded import BY_ID, mesh

CASE = BY_ID["grpo/kl_beta"]  # off-policy, beta: ref_logp


def args(case=CASE):
    i = case.inputs
    return (jnp.asarray(i["logits"]), i["chosen_ids"], i["completion_mask"], i["advantages"],
            i["old_logp"], i["ref_logp"])


def test_inlined_into_the_callers_program():
    f = jax.jit(lambda *a: tj.grpo_loss(*a, beta=0.04, block_size=16)[0])
    text = f.lower(*args()).as_text()
    assert "call @tpuoff_grpo_tiled_fwd" in text and "stablehlo.while" in text
    assert "custom_call" not in text and "callback" not in text
    hlo = f.lower(*args()).compile().as_text()
    assert "custom-call" not in hlo


def test_eager_equals_jit():
    eager = tj.grpo_loss(*args(), beta=0.04)
    jitted = jax.jit(lambda *a: tj.grpo_loss(*a, beta=0.04))(*args())
    vectors.assert_close(eager[0], jitted[0], 0, 0, "loss")


def test_gradient_is_the_vjp_of_the_loss_only():
    z, ids_, mask, adv, old, ref = args()

    def f(lg, a):
        loss, aux = tj.grpo_loss(lg, ids_, mask, a, old, ref, beta=0.04)
        return 3.0 * loss + jnp.sum(aux["logp"]) + jnp.sum(aux["entropy"])

    gz, ga = jax.grad(f, argnums=(0, 1))(z, adv)
    _, _, want = jax_math(CASE, np.asarray(z))
    vectors.assert_close(gz, 3.0 * np.asarray(want), 1e-6, 1e-4, "3 * dloss")
    assert not np.any(np.asarray(ga)), "advantages are constants of the loss"


def test_options_reach_the_kernel():
    z, ids_, mask, adv, old, ref = args()
    base = tj.grpo_loss(z, ids_, mask, adv, old, ref, beta=0.04)[0]
    other = tj.grpo_loss(z, ids_, mask, adv, old, ref, beta=0.04, temperature=0.5)[0]
    assert float(base) != float(other)
    n = float(np.sum(CASE.inputs["completion_mask"]))
    scaled = tj.grpo_loss(z, ids_, mask, adv, old, ref, jnp.float32(2 * n), beta=0.04)[0]
    vectors.assert_close(scaled, float(base) / 2, 1e-7, 1e-5, "total_valid_tokens")


def test_ref_logp_is_unused_with_the_kl_term_off():
    # Trainers pass the reference log-probs whatever beta is (refused before
    # as an "unexpected keyword argument" although given by position).
    z, ids_, mask, adv, old, ref = args()
    without = float(tj.grpo_loss(z, ids_, mask, adv, old)[0])
    assert float(tj.grpo_loss(z, ids_, mask, adv, old, ref)[0]) == without
    assert float(tj.grpo_loss(z, ids_, mask, adv, old, ref, beta=0.0)[0]) == without
    assert float(tj.grpo_loss(z, ids_, mask, adv, old, ref, beta=0.04)[0]) != without


def test_masked_tokens_with_non_finite_inputs_contribute_nothing():
    # Padding positions often hold garbage: NaN or far-off old_logp / ref_logp
    # at mask 0 leave the loss and its gradient as they are (the loss was NaN
    # before: 0 * NaN in the sum, while the gradient was already finite).
    z, ids_, mask, adv, old, ref = args()
    mask = np.array(mask)
    mask[0, :2] = 0
    want, want_g = jax.value_and_grad(lambda x: tj.grpo_loss(x, ids_, mask, adv, old, ref,
                                                              beta=0.04)[0])(z)
    for bad in (np.nan, -100.0):
        o = np.where(mask == 0, np.float32(bad), old).astype(np.float32)
        r = np.where(mask == 0, np.float32(bad), ref).astype(np.float32)
        got, got_g = jax.value_and_grad(lambda x: tj.grpo_loss(x, ids_, mask, adv, o, r,
                                                                beta=0.04)[0])(z)
        assert float(got) == float(want), (bad, float(got), float(want))
        np.testing.assert_array_equal(np.asarray(got_g), np.asarray(want_g))


def test_errors():
    z, ids_, mask, adv, old, ref = args()
    with pytest.raises(TypeError, match=r"argument\(s\) eps_hi that are neither kernel options"):
        tj.grpo_loss(z, ids_, mask, adv, old, ref, beta=0.04, eps_hi=0.3)
    with pytest.raises(TypeError, match="sampler_logp is given but no importance correction"):
        tj.grpo_loss(z, ids_, mask, adv, old, sampler_logp=old)
    with pytest.raises(TypeError, match="sets batch itself"):
        tj.grpo_loss(z, ids_, mask, adv, old, ref, beta=0.04, batch=2)
    with pytest.raises(TypeError, match="needs input 'ref_logp'"):
        tj.grpo_loss(z, ids_, mask, adv, old, beta=0.04)
    with pytest.raises(ValueError, match="delta must be finite and > 1"):
        tj.grpo_loss(z, ids_, mask, adv, old, delta=0.5)
    with pytest.raises(TypeError, match="float32 or bfloat16"):
        tj.grpo_loss(z.astype(jnp.float16), ids_, mask, adv, old)
    with pytest.raises(ValueError, match="kernel must be"):
        tj.grpo_loss(z, ids_, mask, adv, old, kernel="grpo_fused_linear")
    with pytest.raises(ValueError, match="inside jax.shard_map"):
        tj.grpo_loss(z, ids_, mask, adv, old, vocab_axis="model")
    m = mesh((8,), ("model",))
    with pytest.raises(ValueError, match="not an axis"):
        jax.shard_map(lambda lg: tj.grpo_loss(lg, ids_, mask, adv, old, vocab_axis="vocab")[0],
                      mesh=m, in_specs=P(None, None, "model"), out_specs=P())(
            jnp.zeros((2, 6, 56)))


def test_kernels_are_built_once():
    tj.kernel.cache_clear()
    f = jax.jit(jax.grad(lambda lg, *a: tj.grpo_loss(lg, *a, beta=0.04)[0]))
    f(*args())
    f(*args())
    info = tj.kernel.cache_info()
    assert info.misses == 2  # forward and backward module

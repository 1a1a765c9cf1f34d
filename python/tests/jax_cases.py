"""Running test vectors through tpuoff.jax (shared by the jax test files)."""
from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import tpuoff.jax as tj
import vectors

sys.path.insert(0, str(vectors.REPO / "tools" / "xla_check"))
import jax_grpo  # noqa: E402  (the JAX-written math of GRPO_SPEC.md)

LOSS_INPUTS = ("old_logp", "ref_logp", "total_valid_tokens")
AUX = ("per_token_loss", "logp", "entropy", "lse")


def logits_array(case: vectors.Case, dtype: str):
    z = case.inputs["logits"]
    return jnp.asarray(z, jnp.bfloat16 if dtype == "bf16" else jnp.float32)


def extra_inputs(case: vectors.Case, names=()) -> dict:
    """Inputs beyond the four positional ones, by name (kernel options may ask
    for more, e.g. sampler_logp)."""
    skip = {"logits", "hidden", "lm_head", "chosen_ids", "completion_mask", "advantages"}
    return {k: v for k, v in case.inputs.items() if k not in skip}


def loss_fn(case: vectors.Case, **kwargs):
    """f(logits, chosen_ids, mask, advantages, extras) -> (loss, aux) via grpo_loss."""
    def f(logits, chosen_ids, mask, advantages, extras):
        return tj.grpo_loss(logits, chosen_ids, mask, advantages, **extras, **case.options,
                            **kwargs)
    return f


_RESULTS: dict = {}


def value_and_grad(case: vectors.Case, dtype: str, **kwargs):
    """jit(value_and_grad(grpo_loss)) on the case; memoised by (case id, dtype,
    options) so the sharded tests compare against the unsharded run of the
    vector tests without compiling it again."""
    key = (case.id, dtype, tuple(sorted(kwargs.items())))
    if key not in _RESULTS:
        _RESULTS[key] = _value_and_grad(case, dtype, **kwargs)
    return _RESULTS[key]


def _value_and_grad(case: vectors.Case, dtype: str, **kwargs):
    f = loss_fn(case, **kwargs)
    g = jax.jit(jax.value_and_grad(f, has_aux=True))
    (loss, aux), dlogits = g(logits_array(case, dtype), case.inputs["chosen_ids"],
                             case.inputs["completion_mask"], case.inputs["advantages"],
                             extra_inputs(case))
    return loss, aux, dlogits


def check_against_expected(case: vectors.Case, loss, aux, dlogits, atol=None, rtol=None,
                           what=""):
    atol = case.atol if atol is None else atol
    rtol = case.rtol if rtol is None else rtol
    vectors.assert_close(loss, case.expected["loss"], atol, rtol, f"{what} loss")
    for name in AUX:
        vectors.assert_close(aux[name], case.expected[name], atol, rtol, f"{what} {name}")
    vectors.assert_close(np.asarray(dlogits, np.float32), case.expected["dlogits"], atol, rtol,
                         f"{what} dlogits")


def jax_math(case: vectors.Case, logits_f32):
    """value_and_grad of the JAX-written math (tools/xla_check/jax_grpo.py) in f32
    (memoised by case id and logits bytes)."""
    key = (case.id, np.asarray(logits_f32).tobytes())
    if key not in _RESULTS:
        _RESULTS[key] = _jax_math(case, logits_f32)
    return _RESULTS[key]


def _jax_math(case: vectors.Case, logits_f32):
    params = {("temp_mode" if k == "temperature_mode" else k): v for k, v in case.options.items()}
    for name in ("total_valid_tokens", "total_nonempty_rows"):
        if name in case.inputs:  # jax_grpo takes the input when its parameter is set
            params[name] = float(case.inputs[name])
    gp = jax_grpo.GrpoParams(**params)
    gp.on_policy = "old_logp" not in case.inputs
    f = jax_grpo.make_loss_fn(gp)
    get = case.inputs.get

    def loss(z):
        return f(z, get("chosen_ids"), get("completion_mask"), get("advantages"), get("old_logp"),
                 get("ref_logp"), get("sampler_logp"), None if get("total_valid_tokens") is None
                 else jnp.asarray(get("total_valid_tokens")),
                 None if get("total_nonempty_rows") is None
                 else jnp.asarray(get("total_nonempty_rows")))

    (value, (ptl, logp, ent, lse)), g = jax.jit(jax.value_and_grad(loss, has_aux=True))(
        jnp.asarray(logits_f32, jnp.float32))
    return value, dict(per_token_loss=ptl, logp=logp, entropy=ent, lse=lse), g


def bf16_round(x):
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)

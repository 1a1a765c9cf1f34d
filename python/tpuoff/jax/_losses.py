"""grpo_loss, grpo_fused_linear_loss and entropy: tpuoff kernels as JAX functions."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np

import jax
import jax.numpy as jnp
from jax._src import mesh as mesh_lib

import tpuoff
from tpuoff import _api
from tpuoff.jax import _call

# Options the loss functions derive from their arguments.
_DERIVED = ("kernel", "mode", "batch", "seq", "vocab", "logits_dtype", "on_policy",
            "token_count_input", "row_count_input", "mesh", "shard", "global_form", "hidden")
# Run-time scalar inputs that replace a normaliser, and the flag that asks for each.
_COUNT_INPUTS = {"total_valid_tokens": "token_count_input",
                 "total_nonempty_rows": "row_count_input"}


class _Spec(NamedTuple):
    fwd: _call.Kernel
    bwd: _call.Kernel | None
    axes: tuple[str, ...]
    num_diff: int  # the leading arguments that get gradients


def _logits_dtype(function: str, dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return "f32"
    if dtype == np.dtype(jnp.bfloat16):
        return "bf16"
    raise TypeError(f"{function}: logits must be float32 or bfloat16, got {dtype}")


def _axis_size(function: str, name: str) -> int:
    mesh = mesh_lib.get_abstract_mesh()
    if name not in mesh.axis_names:
        raise ValueError(f"{function}: axis {name!r} is not an axis of the enclosing "
                         f"jax.shard_map's mesh (axes: {tuple(mesh.axis_names)}); "
                         "vocab_axis/batch_axis apply inside jax.shard_map only")
    if name not in mesh.manual_axes:
        raise ValueError(f"{function}: axis {name!r} is not manual here: call inside "
                         "jax.shard_map over that axis")
    return mesh.shape[name]


def _axis_names(function: str, kind: str, value) -> tuple[str, ...]:
    """A <kind>_axis argument: None, one mesh axis name or a tuple of them
    (several axes splitting one dimension, the first major, as
    PartitionSpec(("a", "b")))."""
    if value is None:
        return ()
    names = (value,) if isinstance(value, str) else tuple(value)
    if not names or not all(isinstance(n, str) for n in names):
        raise TypeError(f"{function}: {kind}_axis must be a mesh axis name or a tuple of them, "
                        f"got {value!r}")
    return names


def _sharding(function: str, batch_axis, vocab_axis, seq_axis=None):
    """(flags, axes, batch factor, seq factor, vocab factor) for the named
    axes: the kernel is sharded over a mesh of those axes (in this order,
    one shard kind each), which the call maps onto the enclosing mesh."""
    axes, sizes, kinds = [], [], []
    for value, kind in ((batch_axis, "batch"), (seq_axis, "seq"), (vocab_axis, "vocab")):
        for axis in _axis_names(function, kind, value):
            if axis in axes:
                raise ValueError(f"{function}: mesh axis {axis!r} is named twice "
                                 f"(as {kinds[axes.index(axis)]}_axis and {kind}_axis)")
            axes.append(axis)
            sizes.append(_axis_size(function, axis))
            kinds.append(kind)
    factor = {k: int(np.prod([s for s, kk in zip(sizes, kinds) if kk == k], dtype=np.int64))
              for k in ("batch", "seq", "vocab")}
    if not axes:
        return {}, (), 1, 1, 1
    return ({"mesh": "x".join(map(str, sizes)), "shard": ",".join(kinds)},
            tuple(axes), factor["batch"], factor["seq"], factor["vocab"])


def _split_options(function: str, options: dict[str, Any]):
    """Kernel options (CLI flag names) and extra array inputs (by name)."""
    known = set(_api.kernel_option_names())
    flags, arrays = {}, {}
    for key, value in options.items():
        if key in _DERIVED:
            raise TypeError(f"{function}() sets {key} itself (from its arguments)")
        if key in known:
            flags[key] = value
        else:
            arrays[key] = value
    return flags, arrays


def _build(function: str, options: dict[str, Any], modes: tuple[str, ...]):
    kernels = []
    for mode in modes:
        flags = tuple(_api.kernel_flags(function, {**options, "mode": mode}))
        try:
            kernels.append(_call.kernel(flags))
        except ValueError as e:
            raise ValueError(f"{function}: {e}") from e
    return kernels


def _argument(function: str, p, value):
    """One kernel argument of parameter ``p``'s dtype. Integer parameters
    (chosen_ids) take integer arrays only (a float id is refused, not
    truncated); a wider integer type (NumPy's int64 included, which JAX
    would wrap to int32) is narrowed without wrapping: an id outside int32's
    range is outside [0, V) too and becomes -1, which picks no vocab entry
    either (the kernels' rule for ids outside [0, V))."""
    want = np.dtype(p.dtype)
    if want.kind not in "iu":
        return jnp.asarray(value, dtype=want)
    if not hasattr(value, "dtype"):
        value = np.asarray(value)  # lists and Python numbers
    have = np.dtype(value.dtype)
    if have.kind not in "iub":
        raise TypeError(f"{function}: {p.name} must be an integer array, got {have}")
    info = np.iinfo(want)
    if have.kind != "b" and (np.iinfo(have).min < info.min or np.iinfo(have).max > info.max):
        xp = np if isinstance(value, (np.ndarray, np.generic)) else jnp
        outside = value > info.max
        if have.kind == "i":
            outside = outside | (value < info.min)
        value = xp.where(outside, xp.asarray(-1, want), value.astype(want))
    return jnp.asarray(value).astype(want)


def _prepare(function: str, kernel: _call.Kernel, values: dict[str, Any]):
    """The kernel's arguments from named values, in parameter order."""
    args = []
    for p in kernel.inputs:
        if p.name not in values:
            raise TypeError(f"{function}: kernel {kernel.name} needs input {p.name!r}")
        args.append(_argument(function, p, values.pop(p.name)))
    # The reference policy's log-probs with the KL term off (beta=0): trainers
    # pass them whatever beta is, and they weigh nothing.
    values.pop("ref_logp", None)
    if "sampler_logp" in values:
        raise TypeError(f"{function}: sampler_logp is given but no importance correction uses "
                        f"it: set is_level ('token' or 'sequence'), or leave sampler_logp out")
    if values:
        raise TypeError(f"{function}() got argument(s) {', '.join(sorted(values))} that are "
                        f"neither kernel options ({', '.join(_api.kernel_option_names())}) nor "
                        f"inputs kernel {kernel.name} takes with these options")
    return args


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _apply(spec: _Spec, *args):
    return tuple(_call.call(spec.fwd, args, spec.axes))


def _apply_fwd(spec: _Spec, *args):
    outs = tuple(_call.call(spec.fwd, args, spec.axes))
    return outs, (args, outs)


def _apply_bwd(spec: _Spec, residuals, cotangents):
    args, outs = residuals
    named = {p.name: a for p, a in zip(spec.fwd.inputs, args)}
    named.update({p.name: o for p, o in zip(spec.fwd.outputs, outs)})
    grads = _call.call(spec.bwd, [named[p.name] for p in spec.bwd.inputs], spec.axes)
    by_name = {p.name: g for p, g in zip(spec.bwd.outputs, grads)}
    # The backward module is d(loss)/d(input) for d(loss) = 1; only the loss
    # carries a gradient (the other outputs leave through stop_gradient).
    scale = cotangents[0].astype(jnp.float32)
    shares = spec.axes and not _call.jax_config._check_vma.value
    if shares:
        # shard_map(check_vma=False) transposes without knowing what is
        # replicated: a value's cotangent is split into per-device shares
        # (an output of out_specs P() gets ct / mesh size on each device) and
        # the transpose of a psum is a psum of shares. The loss is such a
        # psum over the kernel's axes (its all-reduces), so its cotangent is
        # the psum of the shares, as for the same loss written in JAX; a
        # gradient the module already all-reduces over some of those axes
        # (d_hidden over the vocab shards) is on each of their devices whole,
        # and is handed back as an equal share of it.
        scale = jax.lax.psum(scale, spec.axes)
    result = []
    for p in spec.fwd.inputs[:spec.num_diff]:
        name = f"d{p.name}" if f"d{p.name}" in by_name else f"d_{p.name}"
        g = by_name[name]
        s = scale
        if shares:
            port = next(o for o in spec.bwd.outputs if o.name == name)
            whole_over = tuple(a for a in spec.axes
                               if a not in _call._varying_axes(spec.bwd, port, spec.axes))
            if whole_over:
                s = s / jax.lax.psum(1, whole_over)
        result.append((g.astype(jnp.float32) * s).astype(g.dtype))
    return tuple(result) + (None,) * (len(args) - spec.num_diff)


_apply.defvjp(_apply_fwd, _apply_bwd)


def _loss_call(function, kernel_name, num_diff, values, options, batch_axis, vocab_axis,
               seq_axis, shape_flags):
    """Builds the forward and backward kernels for the arguments and applies
    them through the custom_vjp; returns (loss, aux metrics)."""
    flags, arrays = _split_options(function, options)
    sharding, axes, nb, ns, nv = _sharding(function, batch_axis, vocab_axis, seq_axis)
    values.update(arrays)
    for name, flag in _COUNT_INPUTS.items():
        if values.get(name) is not None:
            flags[flag] = True
    values = {k: v for k, v in values.items() if v is not None}
    flags.update(kernel=kernel_name, on_policy="old_logp" not in values, **sharding)
    flags.update(shape_flags(nb, ns, nv))
    fwd, bwd = _build(function, flags, ("fwd", "bwd"))
    args = _prepare(function, fwd, values)
    spec = _Spec(fwd, bwd, axes, num_diff)
    outs = _apply(spec, *args)
    names = [p.name for p in fwd.outputs]
    aux = {n: jax.lax.stop_gradient(o) for n, o in zip(names[1:], outs[1:])}
    return outs[0], aux


def grpo_loss(logits, chosen_ids, completion_mask, advantages, old_logp=None, ref_logp=None,
              total_valid_tokens=None, *, sampler_logp=None, total_nonempty_rows=None,
              kernel: str = "grpo_tiled", block_size: int = 2048,
              vocab_axis: str | tuple[str, ...] | None = None,
              batch_axis: str | tuple[str, ...] | None = None,
              seq_axis: str | tuple[str, ...] | None = None, **options):
    """The GRPO loss of docs/GRPO_SPEC.md computed by a tpuoff kernel inside the
    caller's XLA program; differentiable w.r.t. ``logits``.

    logits [B,T,V] float32 or bfloat16; chosen_ids [B,T] int; completion_mask
    [B,T]; advantages [B] (or [B,T] with advantage_shape="token");
    old_logp [B,T] (None: on-policy, ratio 1); ref_logp [B,T] (needed when
    beta != 0, accepted and unused when beta is 0); total_valid_tokens []
    (the global token count of token_mean, e.g. over micro-batches; None: the
    mask's sum). Other keyword arguments
    are the kernel options of ``tpuoff dump`` (:func:`tpuoff.kernel_option_names`):
    eps_low, eps_high, temperature, temperature_mode, beta, delta, loss_type,
    max_len, and GRPO_SPEC v2's policy_loss (ppo_clip, gspo, gspo_token,
    cispo, sapo), kl_estimator, log_ratio_clamp, advantage_shape,
    entropy_coef, empty_rows, sapo_tau_pos, sapo_tau_neg, is_level, is_mode,
    is_cap, preset (a trainer's defaults, :func:`tpuoff.kernel_hlo`'s presets).
    Inputs those options ask for: ``sampler_logp`` [B,T] (the sampler's
    log-probabilities, for is_level="token"/"sequence"), ``total_nonempty_rows``
    [] (sequence_mean's global count of non-empty rows with empty_rows="skip";
    None: counted from the mask).

    ``kernel``: "grpo_tiled" (streams the vocab in tiles of ``block_size``) or
    "grpo_reference". Inside ``jax.shard_map``, name the mesh axes each
    dimension of the logits is split over (an axis name, or a tuple of them,
    the first major, as in ``PartitionSpec``): ``vocab_axis`` (the kernel
    merges the shards' softmax statistics over it; tiled kernel only),
    ``batch_axis`` and ``seq_axis`` (token counts, row sums and the loss are
    summed over them; advantages [B] are whole on every seq shard). Any
    combination works, e.g. batch over "data" and vocab over "model" of a 2-D
    mesh; the kernel is tpuoff's module for a mesh of those axes. Results
    equal the unsharded call.

    Returns ``(loss, {"per_token_loss", "logp", "entropy", "lse"})``. Only the
    loss carries a gradient: the dict holds metrics (stop_gradient), and
    advantages, old_logp, ref_logp and the mask are constants of the loss.
    Forward and backward are tpuoff's emitted HLO for the shapes and options
    (a ``jax.custom_vjp``; the backward kernel recomputes the softmax from the
    saved lse instead of keeping [B,T,V] residuals).
    """
    if kernel not in ("grpo_tiled", "grpo_reference"):
        raise ValueError(f"grpo_loss: kernel must be grpo_tiled or grpo_reference, got {kernel!r}")
    logits = jnp.asarray(logits)
    if logits.ndim != 3:
        raise TypeError(f"grpo_loss: logits must be [B,T,V], got shape {logits.shape}")
    dtype = _logits_dtype("grpo_loss", logits.dtype)
    b, t, v = logits.shape
    if kernel == "grpo_tiled":
        options["block_size"] = block_size
    values = {"logits": logits, "chosen_ids": chosen_ids,
              "completion_mask": _constant(completion_mask),
              "advantages": _constant(advantages), "old_logp": _constant(old_logp),
              "ref_logp": _constant(ref_logp),
              "total_valid_tokens": _constant(total_valid_tokens),
              "sampler_logp": _constant(sampler_logp),
              "total_nonempty_rows": _constant(total_nonempty_rows)}
    return _loss_call("grpo_loss", kernel, 1, values, options, batch_axis, vocab_axis, seq_axis,
                      lambda nb, ns, nv: dict(batch=b * nb, seq=t * ns, vocab=v * nv,
                                              logits_dtype=dtype))


def grpo_fused_linear_loss(hidden, lm_head, chosen_ids, completion_mask, advantages,
                           old_logp=None, ref_logp=None, total_valid_tokens=None, *,
                           sampler_logp=None, total_nonempty_rows=None,
                           block_size: int = 2048, token_chunk: int | None = None,
                           vocab_axis: str | tuple[str, ...] | None = None,
                           batch_axis: str | tuple[str, ...] | None = None,
                           seq_axis: str | tuple[str, ...] | None = None, **options):
    """:func:`grpo_loss` of ``logits = hidden @ lm_head`` without ever forming
    the [B,T,V] logits or their gradient (tpuoff's grpo_fused_linear kernel);
    differentiable w.r.t. ``hidden`` [B,T,H] and ``lm_head`` [H,V] (same dtype,
    float32 or bfloat16). ``token_chunk``: tokens per matmul tile (None: all
    B*T). ``vocab_axis``: the mesh axis ``lm_head``'s columns are split over;
    ``batch_axis``/``seq_axis``: the axes ``hidden``'s batch/sequence are
    split over (``lm_head`` replicated there; its gradient is summed over
    them); together or alone, as in :func:`grpo_loss`. The loss options and
    extra inputs are :func:`grpo_loss`'s."""
    hidden, lm_head = jnp.asarray(hidden), jnp.asarray(lm_head)
    if hidden.ndim != 3 or lm_head.ndim != 2 or hidden.shape[2] != lm_head.shape[0]:
        raise TypeError(f"grpo_fused_linear_loss: hidden must be [B,T,H] and lm_head [H,V], "
                        f"got {hidden.shape} and {lm_head.shape}")
    if hidden.dtype != lm_head.dtype:
        raise TypeError(f"grpo_fused_linear_loss: hidden and lm_head must have one dtype, "
                        f"got {hidden.dtype} and {lm_head.dtype}")
    dtype = _logits_dtype("grpo_fused_linear_loss", hidden.dtype)
    b, t, h = hidden.shape
    v = lm_head.shape[1]
    options.update(block_size=block_size, token_chunk=token_chunk)
    values = {"hidden": hidden, "lm_head": lm_head, "chosen_ids": chosen_ids,
              "completion_mask": _constant(completion_mask),
              "advantages": _constant(advantages), "old_logp": _constant(old_logp),
              "ref_logp": _constant(ref_logp),
              "total_valid_tokens": _constant(total_valid_tokens),
              "sampler_logp": _constant(sampler_logp),
              "total_nonempty_rows": _constant(total_nonempty_rows)}

    def shape_flags(nb, ns, nv):
        return dict(batch=b * nb, seq=t * ns, vocab=v * nv, logits_dtype=dtype, hidden=h)

    return _loss_call("grpo_fused_linear_loss", "grpo_fused_linear", 2, values, options,
                      batch_axis, vocab_axis, seq_axis, shape_flags)


def entropy(logits, *, kernel: str = "entropy_tiled", block_size: int = 2048,
            vocab_axis: str | tuple[str, ...] | None = None,
            batch_axis: str | tuple[str, ...] | None = None,
            seq_axis: str | tuple[str, ...] | None = None, **options):
    """Per-token entropy [B,T] of softmax(logits / temperature) by a tpuoff
    entropy kernel (a metric: no gradient flows through it). ``kernel``:
    "entropy_tiled" or "entropy_reference"; options: temperature, ...;
    ``vocab_axis``/``batch_axis``/``seq_axis`` as in :func:`grpo_loss`."""
    if kernel not in ("entropy_tiled", "entropy_reference"):
        raise ValueError(f"entropy: kernel must be entropy_tiled or entropy_reference, "
                         f"got {kernel!r}")
    logits = jnp.asarray(logits)
    if logits.ndim != 3:
        raise TypeError(f"entropy: logits must be [B,T,V], got shape {logits.shape}")
    dtype = _logits_dtype("entropy", logits.dtype)
    flags, arrays = _split_options("entropy", options)
    if arrays:
        raise TypeError(f"entropy() got unexpected keyword argument(s) {', '.join(arrays)}")
    if kernel == "entropy_tiled":
        flags["block_size"] = block_size
    sharding, axes, nb, ns, nv = _sharding("entropy", batch_axis, vocab_axis, seq_axis)
    b, t, v = logits.shape
    flags.update(kernel=kernel, batch=b * nb, seq=t * ns, vocab=v * nv, logits_dtype=dtype,
                 **sharding)
    fwd, = _build("entropy", flags, ("fwd",))
    out = _call.call(fwd, [jax.lax.stop_gradient(logits)], axes)
    return jax.lax.stop_gradient(out[0])


def _constant(x):
    return None if x is None else jax.lax.stop_gradient(jnp.asarray(x))

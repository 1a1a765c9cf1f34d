"""XLA's own memory analysis of jax.grad of the fused loss at the seed shape
(B=1, T=4096, H=1536, V=151936, bf16) on CPU, against the unfused JAX math
(matmul + log-softmax GRPO loss): compile only, nothing runs at that shape."""
import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp

import tpuoff.jax as tj
from jax_cases import jax_grpo

B, T, H, V = 1, 4096, 1536, 151936


def compiled_memory(f, *avals):
    compiled = jax.jit(jax.grad(f, argnums=(0, 1))).lower(*avals).compile()
    m = compiled.memory_analysis()
    return {"temp_bytes": m.temp_size_in_bytes, "argument_bytes": m.argument_size_in_bytes,
            "output_bytes": m.output_size_in_bytes, "alias_bytes": m.alias_size_in_bytes}


def test_fused_loss_temp_bytes_at_the_seed_shape():
    sds = jax.ShapeDtypeStruct
    avals = (sds((B, T, H), jnp.bfloat16), sds((H, V), jnp.bfloat16), sds((B, T), jnp.int32),
             sds((B, T), jnp.float32), sds((B,), jnp.float32), sds((B, T), jnp.float32))

    def fused(h, w, ids_, mask, adv, old):
        return tj.grpo_fused_linear_loss(h, w, ids_, mask, adv, old)[0]

    loss = jax_grpo.make_loss_fn(jax_grpo.GrpoParams(logits_dtype="bf16"))

    def unfused(h, w, ids_, mask, adv, old):
        logits = jnp.einsum("bth,hv->btv", h, w)
        return loss(logits, ids_, mask, adv, old, None, None, None, None)[0]

    ours, theirs = compiled_memory(fused, *avals), compiled_memory(unfused, *avals)
    report = {"shape": dict(B=B, T=T, H=H, V=V, dtype="bf16"), "fused": ours, "unfused": theirs,
              "ratio": theirs["temp_bytes"] / ours["temp_bytes"]}
    out = Path(os.environ.get("TPUOFF_PYTEST_REPORTS", "."))
    out.mkdir(parents=True, exist_ok=True)
    (out / "fused_memory_analysis.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report))
    assert ours["output_bytes"] == theirs["output_bytes"]  # d_hidden, d_lm_head
    assert 4 * ours["temp_bytes"] <= theirs["temp_bytes"], report


def test_fused_loss_lowers_its_tpu_form_for_tpu():
    """jax.grad of the fused loss lowered for TPU (no TPU needed) carries the
    kernel's tpu form (one add-dependency pinning d_lm_head's loop state to
    HBM); lowered for CPU, the cpu form (none). With libtpu in this build,
    the TPU lowering compiles for v6e through `tpuoff compile` and XLA:TPU's
    outputs are the two gradients."""
    import subprocess
    import sys

    import tpuoff

    b, t, h, v = 2, 16, 128, 1024
    sds = jax.ShapeDtypeStruct
    avals = (sds((b, t, h), jnp.bfloat16), sds((h, v), jnp.bfloat16), sds((b, t), jnp.int32),
             sds((b, t), jnp.float32), sds((b,), jnp.float32), sds((b, t), jnp.float32))

    def fused(h_, w, ids_, mask, adv, old):
        return tj.grpo_fused_linear_loss(h_, w, ids_, mask, adv, old, block_size=256)[0]

    step = jax.jit(jax.grad(fused, argnums=(0, 1)))
    hlo = {p: step.trace(*avals).lower(lowering_platforms=(p,)).as_text(dialect="hlo")
           for p in ("cpu", "tpu")}
    assert hlo["cpu"].count("add-dependency(") == 0
    assert hlo["tpu"].count("add-dependency(") == 1
    plugin = tpuoff.pjrt_info().get("tpu_plugin")
    if not plugin:
        return
    out = Path(os.environ.get("TPUOFF_PYTEST_REPORTS", "."))
    out.mkdir(parents=True, exist_ok=True)
    module = out / "jax_fused_grad_tpu.hlo"
    module.write_text(hlo["tpu"])
    cli = str(Path(sys.executable).parent / "tpuoff")
    run = subprocess.run([cli, "compile", str(module), "--target=tpu-v6e:1x1",
                          f"--pjrt-plugin={plugin}", "--json"],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TPU_SKIP_MDS_QUERY": "1"})
    assert run.returncode == 0, run.stderr
    xla = json.loads(run.stdout)["xla_tpu"]
    grads = 2 * (b * t * h + h * v)  # bf16 d_hidden and d_lm_head
    assert grads <= xla["output_bytes"] <= grads + 1024, xla

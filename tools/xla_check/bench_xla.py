#!/usr/bin/env python3
"""XLA:CPU timings for `tpuoff bench`: the same emitted module on the same inputs, and
jax.jit of the JAX-written reference math (jax_grpo.py).

  bench_xla.py CASE_DIR [--no-jax] [--no-xla]

CASE_DIR (written by `tpuoff bench`) holds
  manifest.json  {"module": "module.hlo", "num_partitions": N, "reps": R, "warmup": W,
                  "inputs": [{"name", "dtype": "f32|bf16|s32|pred", "shape": [...],
                              "file": "NAME.bin"}, ...]      (GLOBAL arrays, parameter order)
                  "jax_ref": null | {"kind": "grpo", "params": {GrpoParams fields}}
                                  | {"kind": "grpo_fused", "params": {...}}  (matmul + loss)
                                  | {"kind": "entropy", "temperature": t}}
  module.hlo     HLO text;  NAME.bin  raw little-endian array bytes (bf16 as 16-bit words)

Prints one JSON object on the last stdout line:
  {"xla": {"compile_s", "times_s": [...], "median_s", "peak_rss_bytes"} | {"error"},
   "jax": {...same...} | {"error"} | null, "jax_version", "jaxlib_version"}
Each timing is one execution after `warmup` untimed ones, outputs fetched to completion
(block_until_ready) and released before the next one.  Exit 0 even when a side fails
(its "error" says why); exit 2 on a bad CASE_DIR.
"""
from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import xla_run  # noqa: E402

_DTYPES = {"f32": np.float32, "s32": np.int32, "pred": np.bool_, "f64": np.float64}


def _np_dtype(name: str):
    if name == "bf16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    if name not in _DTYPES:
        raise xla_run.HarnessError(f"unsupported input dtype {name}")
    return _DTYPES[name]


def load_inputs(case_dir: Path, manifest: dict) -> dict:
    out = {}
    for spec in manifest["inputs"]:
        dt = _np_dtype(spec["dtype"])
        shape = tuple(spec["shape"])
        # Mapped, not read: the arrays are copied once into XLA's buffers, and the
        # mapping's pages are page cache the kernel can drop (GiB-sized logits).
        arr = np.memmap(case_dir / spec["file"], dtype=dt, mode="r")
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise xla_run.HarnessError(f"{spec['file']}: {arr.size} elements, shape {shape}")
        out[spec["name"]] = arr.reshape(shape)
    return out


def _peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _reset_peak_rss() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _block(tree) -> None:
    import jax
    for leaf in jax.tree_util.tree_leaves(tree):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()


def _time(run, reps: int, warmup: int) -> dict:
    for _ in range(warmup):
        out = run()
        _block(out)
        del out
    times = []
    _reset_peak_rss()
    for _ in range(max(reps, 1)):
        t0 = time.perf_counter()
        out = run()
        _block(out)
        times.append(time.perf_counter() - t0)
        del out
    return {"times_s": times, "median_s": statistics.median(times),
            "peak_rss_bytes": _peak_rss_bytes()}


def bench_module(case_dir: Path, manifest: dict, inputs: dict) -> dict:
    """Compile module.hlo with XLA:CPU and time execute_sharded on the inputs."""
    n = int(manifest.get("num_partitions", 1))
    xla_run.ensure_cpu_devices(n)
    xc = xla_run._require_api()
    module, _ = xla_run.load_module(case_dir / manifest["module"], "text")
    info = xla_run.module_info(module)
    exec_module = module
    if n > 1:
        exec_module = xc.hlo.hlo_module_from_text(
            xla_run.manualize(xla_run.module_text(module), info))
    t0 = time.perf_counter()
    exe, devs, _ = xla_run.compile_module(exec_module, n)
    compile_s = time.perf_counter() - t0
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    mesh = Mesh(np.array(devs), ("p",)) if n > 1 else None
    args = []
    for p in info.params:
        name = p.name if p.name in inputs else re.sub(r"\.\d+$", "", p.name)
        if name not in inputs:
            raise xla_run.HarnessError(f"no input for parameter {p.number} '{p.name}'")
        arr = inputs[name]
        if arr.dtype != p.dtype:
            arr = arr.astype(p.dtype)
        spec = (xla_run.shard_spec(p.sharding, len(p.shape), n) if n > 1
                else xla_run.ShardSpec("replicated"))
        shards = xla_run.split_global(arr, p.shape, spec, n, p.name)
        bufs = [jax.device_put(s, d) for s, d in zip(shards, devs)]
        args.append(bufs[0] if n == 1 else jax.make_array_from_single_device_arrays(
            tuple(p.shape), NamedSharding(mesh, PartitionSpec()), bufs))

    def run():
        return exe.execute_sharded(args).disassemble_into_single_device_arrays()

    res = _time(run, int(manifest.get("reps", 3)), int(manifest.get("warmup", 1)))
    res["compile_s"] = compile_s
    res["num_partitions"] = n
    return res


def bench_jax(manifest: dict, inputs: dict) -> dict:
    """jax.jit of the reference math (jax_grpo.make_value_and_grad / entropy)."""
    ref = manifest.get("jax_ref")
    import jax
    import jax.numpy as jnp
    if ref["kind"] in ("grpo", "grpo_fused"):
        import jax_grpo
        gp = jax_grpo.GrpoParams(**ref["params"])
        if ref["kind"] == "grpo":
            fn = jax_grpo.make_value_and_grad(gp)
            names = gp.input_names()
        else:
            fn = jax_grpo.make_fused_value_and_grad(gp)
            names = jax_grpo.fused_input_names(gp)
    elif ref["kind"] == "entropy":
        tau = float(ref.get("temperature", 1.0))

        def fn(logits):
            x = logits.astype(jnp.float32) / tau
            mu = jnp.max(x, axis=-1, keepdims=True)
            e = jnp.exp(x - mu)
            s = jnp.sum(e, axis=-1, keepdims=True)
            return (jnp.log(s) - jnp.sum(e * (x - mu), axis=-1, keepdims=True) / s)[..., 0]
        names = ["logits"]
    else:
        raise xla_run.HarnessError(f"unknown jax_ref kind {ref['kind']}")
    missing = [n for n in names if n not in inputs]
    if missing:
        raise xla_run.HarnessError(f"jax reference needs inputs {missing}")
    dev = jax.devices("cpu")[0]
    args = [jax.device_put(inputs[n], dev) for n in names]
    f = jax.jit(fn)
    t0 = time.perf_counter()
    f.lower(*args).compile()
    compile_s = time.perf_counter() - t0
    res = _time(lambda: f(*args), int(manifest.get("reps", 3)), int(manifest.get("warmup", 1)))
    res["compile_s"] = compile_s
    return res


def _guard(fn, *a) -> dict:
    try:
        return fn(*a)
    except Exception as e:  # reported in the JSON, the C++ side prints it
        traceback.print_exc(file=sys.stderr)
        return {"error": f"{type(e).__name__}: {e}"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case_dir")
    ap.add_argument("--no-jax", action="store_true", help="skip jax.jit of the reference math")
    ap.add_argument("--no-xla", action="store_true", help="skip XLA:CPU on the module")
    a = ap.parse_args(argv)
    case_dir = Path(a.case_dir)
    try:
        manifest = json.loads((case_dir / "manifest.json").read_text())
        inputs = load_inputs(case_dir, manifest)
    except (OSError, ValueError, KeyError, xla_run.HarnessError) as e:
        print(f"bench_xla.py: {case_dir}: {e}", file=sys.stderr)
        return 2
    out = {"xla": None, "jax": None}
    if not a.no_xla:
        out["xla"] = _guard(bench_module, case_dir, manifest, inputs)
    if not a.no_jax and manifest.get("jax_ref"):
        out["jax"] = _guard(bench_jax, manifest, inputs)
    try:
        import jax
        import jaxlib
        out["jax_version"] = jax.__version__
        out["jaxlib_version"] = jaxlib.__version__
    except Exception:  # versions are informative only
        pass
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

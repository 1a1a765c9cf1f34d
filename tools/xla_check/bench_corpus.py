#!/usr/bin/env python3
"""The real-HLO corpus side of `tpuoff bench --corpus=DIR`: XLA:CPU timings of the
modules JAX lowers to, and a corpus of the same programs at larger shapes.

  bench_corpus.py time CORPUS_DIR [--only A,B] [--reps R] [--warmup W]
      For each program of CORPUS_DIR/index.json (a jax_corpus.py corpus; sharded and
      unsupported programs are left out): compile CASE/jax.hlo (the module jax.jit
      lowers the program to) with XLA:CPU, as jax.jit does, and time its execution on
      the corpus's inputs (in/arg<i>.npy, placed on the device once), median of R after
      W untimed runs, outputs fetched to completion.  Prints one JSON object on the
      last stdout line: {"cases": {NAME: {"median_s", "times_s", "compile_s"} |
      {"error"}}, "jax_version", "jaxlib_version"}.

  bench_corpus.py generate OUT_DIR
      Writes the corpus's transformer block fwd+bwd, RNN scan, LM loss gradients, CNN
      fwd+bwd and stacked scan (corpus_programs.py, unchanged) at shapes large enough
      that execution, not per-op overhead, is what is timed; in jax_corpus.py's
      layout (jax.hlo, in/, out/ = jax's outputs, case.json, index.json), so
      corpus_check.py checks tpuoff's outputs on them too.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import xla_run  # noqa: E402


def _block(tree) -> None:
    import jax
    for leaf in jax.tree_util.tree_leaves(tree):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()


def time_case(case_dir: Path, meta: dict, reps: int, warmup: int) -> dict:
    xla_run.ensure_cpu_devices(1)
    xla_run._require_api()
    import jax
    # f64 / c128 programs: keep 64-bit inputs 64-bit (as jax_corpus.py ran them).
    jax.config.update("jax_enable_x64", True)
    module, _ = xla_run.load_module(case_dir / "jax.hlo", "text")
    info = xla_run.module_info(module)
    t0 = time.perf_counter()
    exe, devs, _ = xla_run.compile_module(module, 1)
    compile_s = time.perf_counter() - t0
    args = []
    for p in info.params:
        arr = np.load(case_dir / "in" / f"arg{p.number}.npy")
        if arr.dtype.kind == "V":  # bf16 saved by numpy without ml_dtypes
            import ml_dtypes
            arr = arr.view(ml_dtypes.bfloat16)
        if arr.dtype != p.dtype:
            arr = arr.astype(p.dtype)
        args.append(jax.device_put(arr.reshape(p.shape), devs[0]))

    def run():
        return exe.execute_sharded(args).disassemble_into_single_device_arrays()

    for _ in range(warmup):
        _block(run())
    times = []
    for _ in range(max(reps, 1)):
        t = time.perf_counter()
        out = run()
        _block(out)
        times.append(time.perf_counter() - t)
        del out
    return {"median_s": statistics.median(times), "times_s": times, "compile_s": compile_s}


def cmd_time(a) -> int:
    corpus = Path(a.corpus)
    index = json.loads((corpus / "index.json").read_text())
    only = [s for s in a.only.split(",") if s]
    cases = {}
    for meta in index:
        name = meta["name"]
        if only and name not in only:
            continue
        if meta.get("sharded") or meta.get("unsupported"):
            continue
        try:
            cases[name] = time_case(corpus / name, meta, a.reps, a.warmup)
        except Exception as e:  # reported in the JSON; the C++ side prints it
            traceback.print_exc(file=sys.stderr)
            cases[name] = {"error": f"{type(e).__name__}: {e}"}
    out = {"cases": cases}
    try:
        import jax
        import jaxlib
        out["jax_version"] = jax.__version__
        out["jaxlib_version"] = jaxlib.__version__
    except Exception:  # informative only
        pass
    print(json.dumps(out))
    return 0


# ---------------------------------------------------------------- larger shapes


def scaled_programs():
    """(name, fn, make_args, rtol, atol): corpus programs at larger shapes."""
    import corpus_programs as cp
    normal, rng = cp.normal, cp.rng
    d, f = 256, 1024
    return [
        ("transformer_fwd_bwd_large", cp.transformer_fwd_bwd,
         lambda: (cp.block_params(1, d=d, f=f), normal(2, 4, 128, d)), 2e-4, 2e-5),
        ("rnn_scan_large", cp.rnn_scan,
         lambda: (normal(35, 256, 256, scale=0.06), normal(36, 128, 256, scale=0.06),
                  normal(37, 64, 16, 128), np.zeros((16, 256), np.float32)), 2e-4, 2e-5),
        ("lm_loss_large", cp.lm_loss,
         lambda: (normal(3, 4, 128, 8192, scale=3.0),
                  rng(4).integers(0, 8192, (4, 128)).astype(np.int32)), 1e-4, 1e-6),
        ("cnn_fwd_bwd_large", cp.cnn_fwd_bwd,
         lambda: (cp.cnn_params(20), normal(21, 32, 32, 32, 3),
                  rng(22).integers(0, 5, 32).astype(np.int32)), 2e-4, 2e-5),
        ("scan_stack_large", cp.scan_stack,
         lambda: (normal(39, 100, 64, 64, scale=0.5), normal(40, 64, 512, scale=0.1)),
         2e-4, 2e-5),
    ]


def write_case(out: Path, name, fn, make_args, rtol, atol) -> dict:
    import jax
    d = out / name
    (d / "in").mkdir(parents=True, exist_ok=True)
    (d / "out").mkdir(parents=True, exist_ok=True)
    fn.__name__ = fn.__qualname__ = f"corpus_{name}"
    jitted = jax.jit(fn)
    args = make_args()
    lowered = jitted.lower(*args)
    (d / "jax.hlo").write_text(lowered.as_text(dialect="hlo"))
    compiled = lowered.compile()
    outs = compiled(*args)
    jax.block_until_ready(outs)
    best = None
    for _ in range(3):
        t = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    flat_in = jax.tree_util.tree_leaves(args)
    flat_out = jax.tree_util.tree_leaves(outs)
    for i, x in enumerate(flat_in):
        np.save(d / "in" / f"arg{i}.npy", np.asarray(x))
    for i, x in enumerate(flat_out):
        np.save(d / "out" / f"out{i}.npy", np.asarray(x))
    meta = {"name": name, "forms": ["jax.hlo"], "sharded": False, "rtol": rtol, "atol": atol,
            "exact": False, "jax_seconds": best, "num_inputs": len(flat_in),
            "num_outputs": len(flat_out), "num_devices": 1, "unsupported": ""}
    (d / "case.json").write_text(json.dumps(meta, indent=1))
    return meta


def cmd_generate(a) -> int:
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    index = [write_case(out, *p) for p in scaled_programs()]
    (out / "index.json").write_text(json.dumps(index, indent=1))
    print(f"bench_corpus: {len(index)} programs -> {out}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("time")
    t.add_argument("corpus")
    t.add_argument("--only", default="")
    t.add_argument("--reps", type=int, default=5)
    t.add_argument("--warmup", type=int, default=2)
    g = sub.add_parser("generate")
    g.add_argument("out")
    a = ap.parse_args(argv)
    return cmd_time(a) if a.cmd == "time" else cmd_generate(a)


if __name__ == "__main__":
    sys.exit(main())

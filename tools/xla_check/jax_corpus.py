"""Writes a corpus of HLO modules that JAX and XLA:CPU produce for ordinary ML
programs, with inputs and JAX's outputs, for `corpus_check.py`.

Per program NAME, under OUT/NAME/:
  jax.hlo       lowered.as_text(dialect="hlo")  (what jax.jit lowers to)
  jax.pb        the same module as a binary HloModuleProto
  before.hlo    XLA's before_optimizations dump (large constants elided as {...};
                num_partitions=8 for sharded programs)
  opt.hlo       XLA:CPU's optimised module (compiled.as_text(); per-device for
                sharded programs)
  opt.pb        XLA:CPU's optimised module as a binary proto (from the dump)
  tpu.hlo       (some programs) the same jit lowered for TPU
  in/arg<i>.npy, out/out<i>.npy   inputs and jax's outputs (global arrays)
  case.json     forms, tolerances, jax's run time
The programs are written here (see programs() and the corpus_*.py modules).
HLO-text programs (corpus_programs_hlo.py: opcodes jax never emits on CPU)
give hlo.hlo (as written), xla.pb (XLA's proto of it) and opt.hlo, with
XLA:CPU's outputs as the reference.

  python jax_corpus.py --out DIR [--only SUBSTR]
"""
import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import time

DUMP_DIR = tempfile.mkdtemp(prefix="tpuoff_corpus_dump_")
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_force_host_platform_device_count=8"
    + f" --xla_dump_to={DUMP_DIR} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto"
    + " --xla_dump_hlo_module_re=^jit_corpus_")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus_programs  # noqa: E402
import corpus_programs_hlo  # noqa: E402


def _time_jax(compiled, args, reps=3):
    best = None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = compiled(*args)
        jax.block_until_ready(out)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best


def _dump_files(module_name):
    """The newest dump files of jit module `module_name`."""
    found = {}
    for kind, pattern in (("before.hlo", "before_optimizations.txt"),
                          ("opt.pb", "cpu_after_optimizations.hlo.pb")):
        hits = sorted(glob.glob(os.path.join(DUMP_DIR, f"module_*.{module_name}.{pattern}")))
        if hits:
            found[kind] = hits[-1]
    return found


def write_case(out_dir, case):
    name = case.name
    fn = case.fn
    fn.__name__ = f"corpus_{name}"
    fn.__qualname__ = fn.__name__
    d = os.path.join(out_dir, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(os.path.join(d, "in"))
    os.makedirs(os.path.join(d, "out"))
    ctx = jax.enable_x64(True) if case.x64 else _Null()
    with ctx:
        jitted = jax.jit(fn, **case.jit_kwargs)
        args = case.make_args()
        lowered = jitted.lower(*args)
        with open(os.path.join(d, "jax.hlo"), "w") as f:
            f.write(lowered.as_text(dialect="hlo"))
        with open(os.path.join(d, "jax.pb"), "wb") as f:
            f.write(lowered.compiler_ir("hlo").as_serialized_hlo_module_proto())
        if case.tpu_form:
            # What the same jit lowers to for TPU (compile-only platforms
            # need no TPU): cholesky / triangular-solve opcodes.
            tpu = jitted.trace(*args).lower(lowering_platforms=("tpu",))
            with open(os.path.join(d, "tpu.hlo"), "w") as f:
                f.write(tpu.as_text(dialect="hlo"))
        compiled = lowered.compile()
        with open(os.path.join(d, "opt.hlo"), "w") as f:
            f.write(compiled.as_text())
        outs = compiled(*args)
        jax.block_until_ready(outs)
        seconds = _time_jax(compiled, args)
    for kind, path in _dump_files(f"jit_{fn.__name__}").items():
        shutil.copyfile(path, os.path.join(d, kind))
    flat_in = jax.tree_util.tree_leaves(args)
    flat_out = jax.tree_util.tree_leaves(outs)
    for i, a in enumerate(flat_in):
        np.save(os.path.join(d, "in", f"arg{i}.npy"), np.asarray(a))
    for i, a in enumerate(flat_out):
        np.save(os.path.join(d, "out", f"out{i}.npy"), np.asarray(a))
    num_devices = 1
    if case.sharded:
        # XLA:CPU's optimised module is the per-device program: its inputs
        # and outputs are each partition's shards (partition p runs on the
        # p-th device of the sharding's device assignment).
        in_shardings = jax.tree_util.tree_leaves(compiled.input_shardings[0])
        num_devices = len(in_shardings[0]._device_assignment)
        def save_shards(arr, sharding, sub, name):
            arr = jax.device_put(arr, sharding)
            by_device = {s.device: np.asarray(s.data) for s in arr.addressable_shards}
            for p, dev in enumerate(sharding._device_assignment):
                os.makedirs(os.path.join(d, sub, f"device{p}"), exist_ok=True)
                np.save(os.path.join(d, sub, f"device{p}", name), by_device[dev])
        for i, (a, sh) in enumerate(zip(flat_in, in_shardings)):
            save_shards(a, sh, "in", f"arg{i}.npy")
        for i, a in enumerate(flat_out):
            save_shards(a, a.sharding, "out", f"out{i}.npy")
    forms = ["jax.hlo", "jax.pb", "opt.hlo"]
    for kind in ("before.hlo", "opt.pb", "tpu.hlo"):
        if os.path.exists(os.path.join(d, kind)):
            forms.append(kind)
    meta = {
        "name": name,
        "forms": forms,
        "sharded": case.sharded,
        "rtol": case.rtol,
        "atol": case.atol,
        "exact": case.exact,
        "jax_seconds": seconds,
        "num_inputs": len(flat_in),
        "num_outputs": len(flat_out),
        "num_devices": num_devices,
        "unsupported": case.unsupported,
        "random": {str(k): list(v) for k, v in case.random.items()},
    }
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def write_hlo_case(out_dir, case):
    """An HLO-text program: XLA parses, prints, serialises, compiles (opt.hlo)
    and runs it on CPU for the reference outputs."""
    import xla_run
    d = os.path.join(out_dir, case.name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(os.path.join(d, "in"))
    os.makedirs(os.path.join(d, "out"))
    with open(os.path.join(d, "hlo.hlo"), "w") as f:
        f.write(case.text)
    args = case.make_args()
    for i, a in enumerate(args):
        np.save(os.path.join(d, "in", f"arg{i}.npy"), np.asarray(a))
    ctx = jax.enable_x64(True) if case.x64 else _Null()
    with ctx:
        module, _ = xla_run.load_module(os.path.join(d, "hlo.hlo"), "text")
        with open(os.path.join(d, "xla.pb"), "wb") as f:
            f.write(module.as_serialized_hlo_module_proto())
        # Inputs named as the module's parameters, for xla_run.
        info = xla_run.module_info(module)
        named = os.path.join(d, "_xla_in")
        os.makedirs(named)
        for p in sorted(info.params, key=lambda p: p.number):
            shutil.copyfile(os.path.join(d, "in", f"arg{p.number}.npy"),
                            os.path.join(named, f"{p.name}.npy"))
        res = os.path.join(d, "_xla_out")
        summary = xla_run.run_module(os.path.join(d, "hlo.hlo"), named, res, fmt="text")
        shutil.copyfile(os.path.join(res, "xla_compiled.hlo"), os.path.join(d, "opt.hlo"))
        for i, name in enumerate(summary["outputs"]):
            shutil.copyfile(os.path.join(res, f"{name}.npy"), os.path.join(d, "out", f"out{i}.npy"))
        shutil.rmtree(named)
        shutil.rmtree(res)
    meta = {
        "name": case.name,
        "forms": ["hlo.hlo", "xla.pb", "opt.hlo"],
        "sharded": False,
        "rtol": case.rtol,
        "atol": case.atol,
        "exact": case.exact,
        "jax_seconds": summary["seconds"]["execute"],
        "num_inputs": len(args),
        "num_outputs": len(summary["outputs"]),
        "num_devices": 1,
        "unsupported": "",
        "random": {},
    }
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="only programs whose name contains this")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    cases = [c for c in corpus_programs.programs() if a.only in c.name]
    hlo_cases = [c for c in corpus_programs_hlo.programs(corpus_programs.normal, corpus_programs.rng)
                 if a.only in c.name]
    if a.list:
        for c in cases + hlo_cases:
            print(c.name)
        return 0
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    index = []
    for c in cases:
        index.append(write_case(a.out, c))
    for c in hlo_cases:
        index.append(write_hlo_case(a.out, c))
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    shutil.rmtree(DUMP_DIR, ignore_errors=True)
    print(f"jax_corpus: {len(index)} programs in {time.time() - t0:.1f} s -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

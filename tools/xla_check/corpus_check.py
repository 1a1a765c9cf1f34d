"""Runs every module of a jax_corpus.py corpus through tpuoff and compares
with JAX's outputs.

Per program and form (jax.hlo, jax.pb, before.hlo, opt.hlo, opt.pb, tpu.hlo;
hlo.hlo, xla.pb, opt.hlo for the HLO-text programs):
  dump      text -> text is a fixed point, and text -> proto -> text too
  memory    `tpuoff memory` succeeds
  run       `tpuoff run --inputs` matches jax's outputs (rtol/atol of case.json,
            bit-exact for integer/permutation programs; outputs of XLA's `rng`
            opcode, keyed at XLA's compile time, in range with the uniform's
            mean where the form still contains `rng`); its wall time is the
            best of three runs; a form whose large
            constants XLA elided ({...}) must be refused by `run` (exit 1,
            message naming the constant)
Writes a summary table, the largest modules' run times beside jax's (and JSON
with --json); exit 1 if any check failed.

  python corpus_check.py --corpus DIR --tpuoff build/tpuoff [--only SUBSTR]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np


class Fail(Exception):
    pass


def sh(cmd, expect=0, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if expect is not None and p.returncode != expect:
        raise Fail(f"{' '.join(cmd)} exited {p.returncode} (expected {expect}): "
                   f"{(p.stderr or p.stdout).strip()[-1500:]}")
    return p


ENTRY_RE = re.compile(r"^ENTRY\b.*?\{\n(.*?)^\}", re.S | re.M)
PARAM_RE = re.compile(r"^\s*(?:ROOT\s+)?%?([^\s=]+)\s*=\s*.*?\bparameter\((\d+)\)", re.M)


def entry_parameter_names(text):
    m = ENTRY_RE.search(text)
    if not m:
        raise Fail("no ENTRY computation in the dumped text")
    names = {}
    for name, num in PARAM_RE.findall(m.group(1)):
        names[int(num)] = name
    return [names[i] for i in sorted(names)]


def link_inputs(case_dir, names, work, devices=None):
    """DIR/<param>.npy -> jax's inputs (global); with `devices`, also
    DIR/device<d>/<param>.npy -> the shards of partition d."""
    d = os.path.join(work, "in")
    n = len([f for f in os.listdir(os.path.join(case_dir, "in")) if f.endswith(".npy")])
    if len(names) != n:
        raise Fail(f"entry has {len(names)} parameters, jax had {n} inputs")
    for sub in [""] + [f"device{p}" for p in range(devices or 0)]:
        os.makedirs(os.path.join(d, sub), exist_ok=True)
        for i, name in enumerate(names):
            dst = os.path.join(d, sub, f"{name}.npy")
            if os.path.lexists(dst):
                os.remove(dst)
            os.symlink(os.path.abspath(os.path.join(case_dir, "in", sub, f"arg{i}.npy")), dst)
    return d


def check_uniform(got, lo, hi, what):
    """Values of XLA's `rng` opcode that cannot match bit for bit: all in
    [lo, hi), and their mean within 5 standard errors of the middle."""
    g = got.astype(np.float64).ravel()
    if g.size == 0:
        return
    if np.any(g < lo) or np.any(g >= hi):
        raise Fail(f"{what}: values outside [{lo}, {hi}): min {g.min()}, max {g.max()}")
    sigma = (hi - lo) / np.sqrt(12.0)
    if abs(g.mean() - (lo + hi) / 2) > 5 * sigma / np.sqrt(g.size):
        raise Fail(f"{what}: mean {g.mean():.4g} is not that of uniform [{lo}, {hi})")


def compare(case_dir, res_dir, meta, per_device=False, form=""):
    with open(os.path.join(res_dir, "manifest.json")) as f:
        manifest = json.load(f)
    outs = manifest["outputs"] if isinstance(manifest, dict) else manifest
    sets = meta.get("num_devices", 1) if per_device else 1
    if len(outs) != meta["num_outputs"] * sets:
        raise Fail(f"{len(outs)} outputs, jax has {meta['num_outputs']} x {sets} device(s)")
    worst = 0.0
    for k, o in enumerate(outs):
        i, dev = k % meta["num_outputs"], k // meta["num_outputs"]
        got = np.load(os.path.join(res_dir, o["file"]))
        want = np.load(os.path.join(case_dir, "out", f"device{dev}" if per_device else "",
                                    f"out{i}.npy"))
        if got.shape != want.shape:
            raise Fail(f"output {i}: shape {got.shape}, jax {want.shape}")
        if want.dtype.kind == "V":  # ml_dtypes bf16 saved by numpy
            import ml_dtypes
            want = want.view(ml_dtypes.bfloat16)
        if str(i) in meta.get("random", {}) and not form.startswith("opt."):
            lo, hi = meta["random"][str(i)]
            if got.dtype != want.dtype:
                raise Fail(f"output {i}: dtype {got.dtype}, jax {want.dtype}")
            check_uniform(got, lo, hi, f"output {i} (rng)")
            continue
        if meta["exact"] or want.dtype.kind in "biu":
            if got.dtype != want.dtype and got.dtype.itemsize == want.dtype.itemsize and (
                    (got.dtype.kind == "f") != (want.dtype.kind == "f")):
                # XLA types an rng-bit-generator's float output as the
                # unsigned integer of its bits: compare the bits.
                got = got.view(want.dtype)
            if not np.array_equal(got.astype(want.dtype) if got.dtype != want.dtype else got,
                                  want, equal_nan=want.dtype.kind in "fc"):
                bad = np.argwhere(got != want)[:3].tolist()
                raise Fail(f"output {i}: differs from jax at {bad}")
            continue
        g = got.astype(np.complex128 if want.dtype.kind == "c" else np.float64)
        w = want.astype(np.complex128 if want.dtype.kind == "c" else np.float64)
        finite = np.isfinite(w)
        if not np.array_equal(np.isfinite(g), finite) or not np.array_equal(
                g[~finite], w[~finite], equal_nan=True):
            raise Fail(f"output {i}: non-finite values differ from jax")
        err = np.abs(g - w)[finite]
        tol = meta["atol"] + meta["rtol"] * np.abs(w[finite])
        if err.size and np.any(err > tol):
            j = int(np.argmax(err - tol))
            raise Fail(f"output {i}: |diff| {err[j]:.3g} > tol {tol[j]:.3g} "
                       f"(tpuoff {g[finite][j]}, jax {w[finite][j]})")
        if err.size:
            worst = max(worst, float(np.max(err / np.maximum(tol, 1e-300))))
    return worst


WALL_RE = re.compile(r"wall time: ([0-9.]+) s")
INSTR_RE = re.compile(r"^\s*(?:ROOT\s+)?%?[^\s=]+ = ", re.M)


def print_largest(results, count=10):
    """The largest modules (by instruction count) that ran: tpuoff's run
    wall time beside jax's own time of the compiled program."""
    ran = [r for r in results if r.get("seconds") is not None and r.get("instructions")]
    ran.sort(key=lambda r: -r["instructions"])
    if not ran:
        return
    print(f"largest modules: {'program':<24} {'form':<11} {'instrs':>6} {'tpuoff s':>9} "
          f"{'jax s':>9} {'ratio':>7}")
    for r in ran[:count]:
        ratio = r["seconds"] / r["jax_seconds"] if r["jax_seconds"] else float("inf")
        print(f"                 {r['name']:<24} {r['form']:<11} {r['instructions']:>6} "
              f"{r['seconds']:>9.4f} {r['jax_seconds']:>9.4f} {ratio:>7.1f}")


def check_form(tpuoff, case_dir, form, meta, work):
    path = os.path.join(case_dir, form)
    os.makedirs(work, exist_ok=True)
    if meta.get("unsupported"):
        # Known gap: every subcommand must refuse it with the expected message.
        for cmd in (["dump", path], ["memory", path]):
            p = sh([tpuoff] + cmd, expect=1)
            if not re.search(meta["unsupported"], p.stderr):
                raise Fail(f"{cmd[0]}: expected a refusal matching {meta['unsupported']!r}, got "
                           f"{p.stderr.strip()[-300:]!r}")
        return {"run": "refused (not supported yet)", "refused": True}
    t1, t2, t3, pb = (os.path.join(work, n) for n in ("t1.hlo", "t2.hlo", "t3.hlo", "t.pb"))
    sh([tpuoff, "dump", path, f"--out={t1}"])
    sh([tpuoff, "dump", t1, f"--out={t2}"])
    sh([tpuoff, "dump", t1, "--format=proto", f"--out={pb}"])
    sh([tpuoff, "dump", pb, f"--out={t3}"])
    text1 = open(t1).read()
    if open(t2).read() != text1:
        raise Fail("dump: text -> text is not a fixed point")
    if open(t3).read() != text1:
        raise Fail("dump: text -> proto -> text differs")
    instructions = len(INSTR_RE.findall(text1))
    sh([tpuoff, "memory", path])
    # XLA's optimised module of a sharded program is the per-device program.
    per_device = meta["sharded"] and form.startswith("opt.")
    inputs = link_inputs(case_dir, entry_parameter_names(text1), work,
                         meta.get("num_devices") if per_device else None)
    res = os.path.join(work, "res")
    elided = "{...}" in text1
    p = sh([tpuoff, "run", path, f"--inputs={inputs}", f"--outputs={res}"],
           expect=1 if elided else 0)
    if elided:
        if "elided" not in p.stderr:
            raise Fail(f"run of a module with elided constants: unclear message {p.stderr!r}")
        return {"run": "refused (elided constants)", "instructions": instructions}
    worst = compare(case_dir, res, meta, per_device, form)
    # Best of three runs (jax's time is its best of three too).
    times = [float(m.group(1)) for m in [WALL_RE.search(p.stdout)] if m]
    for _ in range(2):
        q = sh([tpuoff, "run", path, f"--inputs={inputs}"])
        times += [float(m.group(1)) for m in [WALL_RE.search(q.stdout)] if m]
    return {"run": "ok", "seconds": min(times) if times else None, "worst_tol_ratio": worst,
            "instructions": instructions}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tpuoff", required=True)
    ap.add_argument("--work", default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--json", default=None)
    ap.add_argument("--generate", action="store_true",
                    help="(re)write the corpus with jax_corpus.py first when it is missing or "
                         "older than the generator")
    a = ap.parse_args()
    if a.generate:
        here = os.path.dirname(os.path.abspath(__file__))
        sources = [os.path.join(here, f) for f in
                   ("jax_corpus.py", "corpus_programs.py", "corpus_programs_more.py",
                    "corpus_programs_linalg.py", "corpus_programs_hlo.py",
                    "corpus_programs_audit.py")]
        index_path = os.path.join(a.corpus, "index.json")
        if not os.path.exists(index_path) or os.path.getmtime(index_path) < max(
                os.path.getmtime(f) for f in sources):
            subprocess.run([sys.executable, sources[0], "--out", a.corpus], check=True)
    work = a.work or os.path.join(a.corpus, "_check")
    # Each check writes new output directories (`run --outputs` wants a new
    # or empty one): start from an empty work directory.
    shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(a.corpus, "index.json")) as f:
        index = [m for m in json.load(f) if a.only in m["name"]]
    results, failures = [], 0
    t0 = time.time()
    for meta in index:
        case_dir = os.path.join(a.corpus, meta["name"])
        for form in meta["forms"]:
            r = {"name": meta["name"], "form": form, "jax_seconds": meta["jax_seconds"]}
            try:
                r.update(check_form(a.tpuoff, case_dir, form, meta,
                                    os.path.join(work, meta["name"], form)))
                r["ok"] = True
            except (Fail, subprocess.TimeoutExpired, OSError) as e:
                r["ok"] = False
                r["error"] = str(e)
                failures += 1
            results.append(r)
            status = "ok  " if r["ok"] else "FAIL"
            extra = r.get("error", "") if not r["ok"] else (
                f"run {r['seconds']:.4f}s (jax {meta['jax_seconds']:.4f}s)"
                if r.get("seconds") is not None else r.get("run", ""))
            print(f"{status} {meta['name']:<24} {form:<11} {extra}", flush=True)
    n = len(results)
    print_largest(results)
    refused = sum(1 for r in results if r.get("refused"))
    print(f"corpus: {len(index)} programs, {n} modules: {n - failures} passed "
          f"({refused} of them refused as known unsupported), {failures} failed "
          f"({time.time() - t0:.1f} s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""(Re)generate tpuoff's own test vectors from the float64 reference.

  gen_vectors.py [--out DIR]        write DIR/{grpo,grpo_fused,grpo_v2,grpo_fused_v2}/<case>/
                                    and DIR/README.md (default: tests/testdata)
  gen_vectors.py --check DIR        generate into a temporary directory and require every file
                                    to be byte-identical to DIR's (and no file missing or extra)

Layout (the same as ../shared/testdata): case.json (shape, kernel, logits_dtype, on_policy,
params, inputs, expected, tolerance, notes), inputs as <HLO parameter>.npy (float32; int32
chosen_ids; bf16 cases hold bf16-exact float32), expected_<output>.npy in float32.  The
cases are vector_cases.py's recipes; inputs come from make_inputs.py (seeded, no token within
1e-3 of a clip/clamp/cap boundary: asserted here again), expected values from grpo_ref.py.
"""
from __future__ import annotations

import argparse
import filecmp
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import grpo_ref as ref  # noqa: E402
import make_inputs  # noqa: E402
import vector_cases as vc  # noqa: E402

DEFAULT_OUT = HERE.parents[1] / "tests" / "testdata"
V1_KEYS = {"eps_low", "eps_high", "temperature", "temp_mode", "beta", "delta", "loss_type", "max_len",
           "total_valid_tokens"}
# At least as many cases per folder as ../shared/testdata has.
MIN_CASES = {vc.GRPO: 12, vc.GRPO_FUSED: 3, vc.GRPO_V2: 19, vc.GRPO_FUSED_V2: 3}
MAX_TOTAL_BYTES = 8 << 20


def npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def case_files(folder: str, r: make_inputs.Recipe) -> dict:
    """{file name: bytes} of one case directory."""
    if folder in (vc.GRPO, vc.GRPO_FUSED):
        extra = set(r.params) - V1_KEYS
        if extra:
            raise ValueError(f"{folder}/{r.name}: v2 parameters {sorted(extra)} belong in a *_v2 folder")
    if r.fused != (folder in (vc.GRPO_FUSED, vc.GRPO_FUSED_V2)):
        raise ValueError(f"{folder}/{r.name}: H={r.H} does not fit the folder")
    p, arrays, out, attempt = make_inputs.draw(r)
    problems = make_inputs.margin_problems(out["terms"])
    if problems:  # draw() only returns clean draws; this is the generator's own assertion
        raise AssertionError(f"{folder}/{r.name}: tokens near a boundary: {problems}")
    names = p.input_names(r.fused)
    if sorted(names) != sorted(arrays):
        raise AssertionError(f"{folder}/{r.name}: inputs {sorted(arrays)} vs {names}")
    files: dict = {}
    inputs: dict = {}
    for n in names:
        a = arrays[n]
        if a.dtype not in (np.float32, np.int32):
            raise AssertionError(f"{n}: dtype {a.dtype}")
        if r.dtype == "bf16" and n in ("logits", "hidden", "lm_head"):
            assert np.array_equal(make_inputs.to_bf16_exact(a), a), f"{n} is not bf16-exact"
        files[f"{n}.npy"] = npy_bytes(a)
        inputs[n] = {"dtype": str(a.dtype), "file": f"{n}.npy", "shape": list(a.shape)}
    expected: dict = {}
    for n in (ref.FUSED_OUTPUTS if r.fused else ref.OUTPUTS):
        e = np.asarray(out[n], dtype=np.float64)
        if not np.all(np.isfinite(e)):
            raise AssertionError(f"{folder}/{r.name}: non-finite expected {n}")
        files[f"expected_{n}.npy"] = npy_bytes(e.astype(np.float32))
        expected[n] = {"file": f"expected_{n}.npy", "shape": list(e.shape)}
    mask = arrays["completion_mask"] == 0
    grad = out["d_hidden"] if r.fused else out["dlogits"]
    if not np.all(grad[mask] == 0):
        raise AssertionError(f"{folder}/{r.name}: masked tokens with a nonzero gradient")
    params = dict(r.params)
    if "total_valid_tokens" in params:     # the value the run-time input holds
        params["total_valid_tokens"] = float(arrays["total_valid_tokens"])
    if "total_nonempty_rows" in params:
        params["total_nonempty_rows"] = float(arrays["total_nonempty_rows"])
    diag = out["terms"]["diag"]
    exercised = ", ".join(f"{k}={v}" for k, v in sorted(diag.items()) if v)
    shape = {"B": r.B, "T": r.T, "V": r.V} | ({"H": r.H} if r.fused else {})
    margin = min((float(np.min(m)) for m in out["terms"]["margins"].values() if np.size(m)), default=None)
    notes = (r.notes + "; " if r.notes else "") + ("on-policy" if r.on_policy else "off-policy") + \
        f"; exercises {exercised}" + (f"; min boundary distance {margin:.3g}" if margin is not None else "")
    atol, rtol = vc.TOLERANCE[("fused" if r.fused else "grpo", r.dtype)]
    case = {"expected": expected, "inputs": inputs, "kernel": "grpo_fused_linear" if r.fused else "grpo",
            "logits_dtype": r.dtype, "notes": notes, "on_policy": r.on_policy, "params": params,
            "seed": [r.seed, attempt], "shape": shape, "tolerance": {"atol": atol, "rtol": rtol}}
    files["case.json"] = (json.dumps(case, indent=1, sort_keys=True) + "\n").encode()
    return files


def readme(index: dict, sizes: dict) -> bytes:
    lines = [
        "# tpuoff test vectors (generated)",
        "",
        "Written by `tools/reference/gen_vectors.py` from tpuoff's own float64 reference of the GRPO",
        "spec (`tools/reference/grpo_ref.py`); do not edit by hand: change",
        "`tools/reference/vector_cases.py` and regenerate (`tools/reference/README.md`). The ctest",
        "`reference_vectors_regenerate` fails when these files differ from a fresh generation.",
        "",
        "- `grpo/<case>/`, `grpo_v2/<case>/`: `case.json` (`shape` {B,T,V}, `kernel`, `logits_dtype` f32|bf16,",
        "  `on_policy`, `params` (absent = default), `inputs`, `expected`, `tolerance` {atol, rtol}: pass when",
        "  |got - expected| <= atol + rtol*|expected| elementwise, `notes`, `seed`), inputs as `<HLO parameter>.npy`",
        "  (float32, int32 `chosen_ids`; bf16 cases hold bf16-exact float32), `expected_<output>.npy` in float32",
        "  for `loss`, `per_token_loss`, `logp`, `entropy` (also the entropy kernels' output), `lse`, `dlogits`.",
        "- `grpo_fused/<case>/`, `grpo_fused_v2/<case>/`: the fused LM-head kernel: `hidden` [B,T,H] and `lm_head`",
        "  [H,V] instead of `logits`, `d_hidden` and `d_lm_head` instead of `dlogits`; `shape` has H.",
        "- `grpo/`, `grpo_fused/` use the first part of the spec only; `*_v2/` the \"Policy-loss variants (v2)\"",
        "  (`params` may hold policy_loss, kl_estimator, log_ratio_clamp, advantage_shape, entropy_coef,",
        "  empty_rows, sapo_tau_pos, sapo_tau_neg, is_level, is_mode, is_cap; inputs `sampler_logp` when",
        "  is_level is not none, `advantages` [B,T] for advantage_shape token, `total_nonempty_rows` [] when",
        "  params has total_nonempty_rows, as `total_valid_tokens` for the token count).",
        "- No token lies within 1e-3 (log-ratio or d units) of a clip, clamp or cap boundary.",
        "",
        "| folder/case | B,T,V(,H) | dtype | params | notes |",
        "|---|---|---|---|---|",
    ]
    for folder, cases in index.items():
        for name, case in cases:
            s = case["shape"]
            shape = ",".join(str(s[k]) for k in ("B", "T", "V", "H") if k in s)
            params = ", ".join(f"{k}={v}" for k, v in sorted(case["params"].items())) or "defaults"
            lines.append(f"| {folder}/{name} | {shape} | {case['logits_dtype']} | {params} | {case['notes']} |")
    lines += ["", "Sizes: " + ", ".join(f"{k}/ {v / 1024:.0f} KiB" for k, v in sizes.items())
              + f"; total {sum(sizes.values()) / 1024:.0f} KiB.", ""]
    return "\n".join(lines).encode()


def generate(out: Path) -> dict:
    """Write every case under `out`; returns {folder: bytes}."""
    out.mkdir(parents=True, exist_ok=True)
    index, sizes = {}, {}
    for folder, recipes in vc.all_cases().items():
        if len(recipes) < MIN_CASES[folder]:
            raise AssertionError(f"{folder}: {len(recipes)} cases, want >= {MIN_CASES[folder]}")
        names = [r.name for r in recipes]
        if len(set(names)) != len(names):
            raise AssertionError(f"{folder}: duplicate case names")
        fdir = out / folder
        if fdir.exists():  # cases no longer in the table go away
            for old in fdir.iterdir():
                if old.is_dir() and (old / "case.json").exists() and old.name not in names:
                    shutil.rmtree(old)
        index[folder], sizes[folder] = [], 0
        for r in recipes:
            files = case_files(folder, r)
            d = fdir / r.name
            if d.exists():
                shutil.rmtree(d)
            d.mkdir(parents=True)
            for fname, data in files.items():
                (d / fname).write_bytes(data)
                sizes[folder] += len(data)
            index[folder].append((r.name, json.loads(files["case.json"])))
            print(f"{folder}/{r.name}: {sum(map(len, files.values())) / 1024:.0f} KiB", flush=True)
    total = sum(sizes.values())
    if total > MAX_TOTAL_BYTES:
        raise AssertionError(f"vectors take {total} bytes, over the {MAX_TOTAL_BYTES} budget")
    (out / "README.md").write_bytes(readme(index, sizes))
    print("total " + ", ".join(f"{k} {v / 1024:.0f} KiB" for k, v in sizes.items()) + f" = {total / 1024:.0f} KiB")
    return sizes


def tree(root: Path) -> set:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def check(against: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="tpuoff_vectors_") as tmp:
        fresh = Path(tmp)
        generate(fresh)
        want, have = tree(fresh), tree(against)
        problems = [f"missing {f}" for f in sorted(want - have)] + [f"extra {f}" for f in sorted(have - want)]
        problems += [f"differs {f}" for f in sorted(want & have)
                     if not filecmp.cmp(fresh / f, against / f, shallow=False)]
    if problems:
        print(f"FAIL: {against} is not what gen_vectors.py generates ({len(problems)} files):")
        print("\n".join("  " + p for p in problems[:50]))
        print("regenerate with: tools/reference/gen_vectors.py (after tools/reference/setup_venv.sh)")
        return 1
    print(f"PASS: {len(want)} files in {against} byte-identical to a fresh generation")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--out", type=Path, default=None, help=f"output directory (default {DEFAULT_OUT})")
    g.add_argument("--check", type=Path, default=None, help="compare a fresh generation with this directory")
    a = ap.parse_args(argv)
    np.seterr(all="ignore")
    if a.check is not None:
        return check(a.check)
    generate(a.out or DEFAULT_OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())

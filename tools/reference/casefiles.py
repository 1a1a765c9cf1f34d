"""Reading and evaluating a test-vector case directory (layout: tests/testdata/README.md).

  load(case_dir)          -> (case.json dict, Params, {input name: array})
  evaluate(case, params, arrays) -> {output name: float64 array} by grpo_ref
  compare(case_dir)       -> per-output agreement of the stored expected_*.npy with grpo_ref,
                             and of the effect counts in its notes
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

import grpo_ref as ref

FUSED_KERNEL = "grpo_fused_linear"


def load(case_dir: Path) -> tuple:
    case = json.loads((case_dir / "case.json").read_text())
    params = ref.Params.from_case(case.get("params", {}), case.get("on_policy", False))
    arrays = {name: np.load(case_dir / spec["file"]) for name, spec in case["inputs"].items()}
    fused = case.get("kernel") == FUSED_KERNEL
    want = set(params.input_names(fused))
    if set(arrays) != want:
        raise ref.SpecError(f"{case_dir}: inputs {sorted(arrays)} but the params need {sorted(want)}")
    for name, spec in case["inputs"].items():
        if list(arrays[name].shape) != list(spec["shape"]):
            raise ref.SpecError(f"{case_dir}: {name} has shape {arrays[name].shape}, case.json says {spec['shape']}")
    return case, params, arrays


def evaluate(case: dict, params: ref.Params, arrays: dict) -> dict:
    if case.get("kernel") == FUSED_KERNEL:
        out = ref.grpo_fused(arrays["hidden"], arrays["lm_head"], arrays, params)
        names = ref.FUSED_OUTPUTS
    else:
        out = ref.grpo(arrays["logits"], arrays, params)
        names = ref.OUTPUTS
    return {n: np.asarray(out[n], dtype=np.float64) for n in names} | {"_terms": out["terms"]}


def note_counts(case: dict) -> dict:
    """The "notes" counts of a case ("... exercises clamped=19, is_over=2, ...")."""
    return {k: int(v) for k, v in re.findall(r"\b(\w+)=(\d+)\b", case.get("notes", ""))}


def compare(case_dir: Path) -> dict:
    """{output: {max_abs, worst_ratio (|diff| / (atol + rtol |expected|)), ok}} for one case,
    plus "notes" when the case's notes count effects (clamped tokens, IS weights over the
    cap, ...) the reference counts differently."""
    case, params, arrays = load(case_dir)
    got = evaluate(case, params, arrays)
    diag = got["_terms"]["diag"]
    differ = {k: (v, diag[k]) for k, v in note_counts(case).items() if k in diag and diag[k] != v}
    atol, rtol = case["tolerance"]["atol"], case["tolerance"]["rtol"]
    result = {}
    for name, spec in case["expected"].items():
        e = np.load(case_dir / spec["file"]).astype(np.float64)
        g = got[name]
        if e.shape != g.shape:
            result[name] = {"ok": False, "error": f"shape {e.shape} vs reference {g.shape}"}
            continue
        diff = np.abs(g - e)
        ratio = diff / (atol + rtol * np.abs(e))
        i = int(np.argmax(ratio)) if ratio.size else 0
        result[name] = {"ok": bool(np.all(ratio <= 1.0)), "max_abs": float(diff.max(initial=0.0)),
                        "worst_ratio": float(ratio.max(initial=0.0)),
                        "worst_index": [int(v) for v in np.unravel_index(i, e.shape)] if e.ndim else [],
                        "n_bad": int(np.sum(ratio > 1.0))}
    if differ:
        result["notes"] = {"ok": False, "error": "effect counts (notes vs reference): " + ", ".join(
            f"{k} {a} vs {b}" for k, (a, b) in sorted(differ.items()))}
    return result

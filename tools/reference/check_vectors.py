#!/usr/bin/env python3
"""Check a test-vector tree against tpuoff's own float64 reference (grpo_ref.py).

  check_vectors.py ROOT [--folders grpo,grpo_fused,grpo_v2,grpo_fused_v2]

Every ROOT/<folder>/<case>/case.json is evaluated by the reference on the case's own
inputs, and every expected_<output>.npy must agree within the case's tolerance
(|reference - expected| <= atol + rtol*|expected|), and the effect counts a case's notes
state (clamped=, is_over=, pg_dead=, ...) must be the reference's.  Used by ctest on ../shared/testdata
(an independent implementation of GRPO_SPEC.md) when it exists.  Prints one line per
case with the worst |difference| / tolerance; exit 1 when a case disagrees, cannot be
read, or a folder has no case.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import casefiles  # noqa: E402

FOLDERS = ("grpo", "grpo_fused", "grpo_v2", "grpo_fused_v2")


def describe(v: dict) -> str:
    if "error" in v:
        return v["error"]
    return f"{v['n_bad']} elements beyond tolerance, worst at {v['worst_index']}, max abs {v['max_abs']:.3g}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path)
    ap.add_argument("--folders", default=",".join(FOLDERS))
    a = ap.parse_args(argv)
    np.seterr(all="ignore")
    failed, passed, worst_all = [], 0, 0.0
    for folder in a.folders.split(","):
        dirs = sorted(p.parent for p in (a.root / folder).glob("*/case.json"))
        if not dirs:
            failed.append(f"{folder}: no cases under {a.root / folder}")
            print(f"FAIL {folder}: no cases", flush=True)
            continue
        for d in dirs:
            cid = f"{folder}/{d.name}"
            try:
                r = casefiles.compare(d)
            except Exception as e:  # an unreadable case is a failure, keep going
                failed.append(f"{cid}: {type(e).__name__}: {e}")
                print(f"FAIL {cid}: {type(e).__name__}: {e}", flush=True)
                continue
            bad = {k: v for k, v in r.items() if not v["ok"]}
            worst = max(v.get("worst_ratio", 0.0) for v in r.values())
            worst_all = max(worst_all, worst)
            if bad:
                detail = "; ".join(f"{k}: {describe(v)}" for k, v in bad.items())
                failed.append(f"{cid}: {detail}")
                print(f"FAIL {cid}: {detail}", flush=True)
            else:
                passed += 1
                counted = casefiles.note_counts(json.loads((d / "case.json").read_text()))
                print(f"PASS {cid} ({len(r)} outputs, worst |ref-expected|/tol {worst:.2g}"
                      f"{', effect counts agree' if counted else ''})", flush=True)
    print(f"{passed} cases agree, {len(failed)} fail; worst |ref-expected|/tolerance over all: {worst_all:.3g}")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

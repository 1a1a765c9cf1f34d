#!/usr/bin/env python3
"""XLA conformance driver: tpuoff <-> real XLA (pinned jaxlib, CPU), both directions.

  conformance.py --part PART --tpuoff BIN --out DIR [--testdata DIR] [--only SUBSTR]
  conformance.py --part report --out DIR [--expect PART...]

PART
  forward-none | forward-batch | forward-vocab
      the kernel x mode x logits-dtype matrix at small ragged shapes, unsharded or sharded
      over 8 CPU devices: tpuoff dump (text + binary proto) -> XLA parses both, compiles
      and runs them on the inputs `tpuoff run` gets -> outputs agree within the spec
      tolerance -> the text (and proto) XLA writes back runs on tpuoff with the same
      results.  Sharded cases also run JAX's global form of the shard_map (--global-form)
      on XLA's SPMD partitioner.  forward-none also checks every fwd_bwd GRPO kernel
      (reference, tiled, fused) under parameter variants against the JAX-written math
      (jax.value_and_grad of jax_grpo.py's loss; for the fused kernel, of the unfused
      matmul + loss).  Memory: XLA's compiled memory stats beside tpuoff's
      simulated peak for every module.
  testdata | testdata-v2
      every test-vector case of --testdata (default tests/testdata: grpo/, grpo_fused/;
      testdata-v2: the policy-loss variants of grpo_v2/, grpo_fused_v2/) through tpuoff's
      kernels (reference, tiled, batch- and vocab-sharded, entropy, fused) on XLA and
      tpuoff, both against expected_*.npy.
  reverse
      the GRPO math in JAX (jax_grpo.py, one-hot and gather forms) on every --testdata
      grpo/ case: HLO before and after XLA's optimisations (also with XLA:CPU's default
      YNNPACK fusions) runs on tpuoff and matches JAX and the expected values; and every
      tests/corpus module XLA compiles runs on XLA and tpuoff with equal results.
  testdata-shared | testdata-v2-shared | reverse-shared
      the same on another vector set (ctest: ../shared/testdata when it exists), the
      corpus left out.
  report
      merges the parts' JSON into DIR/../xla_conformance.{md,json}; fails when a part
      (the six above, and those named by --expect) is missing or failed.
Each part writes DIR/<part>.json and refreshes the report; exit 1 on any failure.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
import zlib
from pathlib import Path
from typing import Optional

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import grpo_inputs  # noqa: E402
import xla_run  # noqa: E402
import conformance_report  # noqa: E402

KERNEL_MODES = {
    "grpo_reference": ["fwd", "bwd", "fwd_bwd"],
    "grpo_tiled": ["fwd", "bwd", "fwd_bwd"],
    "entropy_reference": ["fwd"],
    "entropy_tiled": ["fwd"],
    "grpo_fused_linear": ["fwd", "bwd", "fwd_bwd"],
}
VOCAB_SHARDABLE = ("grpo_tiled", "entropy_tiled", "grpo_fused_linear")
MESH = 8
# Small shapes with ragged tiles: V=300 is 9 tiles of 32 + 12; over 8 vocab shards of
# ceil(300/8)=38 columns (the last has 34 real + 4 padding) each shard is 32 + 6; the fused
# kernel's 16 tokens go in chunks of 6, 6, 4.
SHAPES = {"none": (2, 8, 300), "batch": (8, 4, 300), "vocab": (2, 8, 300)}
BLOCK, HIDDEN, TOKEN_CHUNK = 32, 16, 6


class CaseError(RuntimeError):
    pass


class Tpuoff:
    def __init__(self, binary: str):
        self.binary = binary

    # Small shapes run in well under a second; a hang must fail its case, not the
    # whole part at ctest's timeout.
    TIMEOUT_S = 120

    def __call__(self, args: list, what: str) -> str:
        try:
            r = subprocess.run([self.binary] + [str(a) for a in args], capture_output=True, text=True,
                               timeout=self.TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            raise CaseError(f"{what}: tpuoff {args[0]} did not finish in {self.TIMEOUT_S}s") from e
        if r.returncode != 0:
            raise CaseError(f"{what}: tpuoff {args[0]} exit {r.returncode}: {r.stderr.strip()[-1500:]}")
        return r.stdout

    def run(self, module: Path, inputs: Path, outputs: Path, what: str) -> dict:
        if outputs.exists():
            shutil.rmtree(outputs)
        out = self(["run", module, f"--inputs={inputs}", f"--outputs={outputs}"], what)
        peaks = [int(m.group(1)) for m in re.finditer(r"peak HBM (\d+) bytes", out)]
        return {"peak_bytes": max(peaks) if peaks else None, "devices": len(peaks)}

    def memory(self, module: Path, what: str) -> dict:
        doc = json.loads(self(["memory", module, "--json", "--top=3"], what))
        g = max(doc["groups"], key=lambda x: x["peak_bytes"])
        keys = ("peak_bytes", "argument_bytes", "output_bytes", "temp_bytes", "tpu_peak_bytes",
                "peak_instruction")
        return {k: g.get(k) for k in keys} | {"num_devices": doc.get("num_devices")}


class Case:
    """One module (or testdata variant): its checks, memory and outcome."""

    def __init__(self, cid: str, meta: dict):
        self.cid, self.meta = cid, meta
        self.checks: list = []
        self.memory: dict = {}
        self.error: Optional[str] = None
        self.t0 = time.time()

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.checks) and all(c["ok"] for c in self.checks)

    def compare(self, name: str, got: Path, ref: Path, atol: float, rtol: float,
                names: Optional[list] = None, prefix: str = "") -> bool:
        if names is None:
            names = sorted(f.name[len(prefix):-4] for f in ref.glob(f"{prefix}*.npy"))
        worst = {"max_abs": 0.0, "max_rel": 0.0}
        ok, exact, msgs = bool(names), True, []
        for nm in names:
            fa, fb = got / f"{nm}.npy", ref / f"{prefix}{nm}.npy"
            if not fa.exists() or not fb.exists():
                ok = False
                msgs.append(f"{nm}: missing {fa if not fa.exists() else fb}")
                continue
            a, b = np.load(fa), np.load(fb)
            r = xla_run.compare_arrays(a, b, atol, rtol)
            if "error" in r:
                ok = False
                msgs.append(f"{nm}: {r['error']}")
                continue
            exact &= bool(np.array_equal(a, b, equal_nan=True))
            worst = {k: max(worst[k], r[k]) for k in worst}
            if not r["ok"]:
                ok = False
                msgs.append(f"{nm}: {r['n_bad']}/{r['size']} beyond atol={atol:g} rtol={rtol:g} "
                            f"(max_abs {r['max_abs']:.3g})")
        self.checks.append({"name": name, "ok": ok, "exact": exact and ok, "outputs": names,
                            "atol": atol, "rtol": rtol, **worst, "detail": "; ".join(msgs)})
        return ok

    def fail(self, e: BaseException) -> None:
        self.error = f"{type(e).__name__}: {e}"

    def to_json(self) -> dict:
        return {"id": self.cid, **self.meta, "ok": self.ok, "error": self.error, "checks": self.checks,
                "memory": self.memory, "seconds": round(time.time() - self.t0, 2)}

    def line(self) -> str:
        if self.ok:
            worst = max((c["max_abs"] for c in self.checks), default=0.0)
            return f"PASS {self.cid} ({len(self.checks)} checks, max_abs {worst:.2g})"
        bad = [f"{c['name']}: {c['detail']}" for c in self.checks if not c["ok"]]
        return f"FAIL {self.cid}: " + " | ".join(([self.error] if self.error else []) + bad)


def param_names(module_path: Path) -> list:
    mod, _ = xla_run.load_module(module_path, "text")
    return [p.name for p in xla_run.module_info(mod).params]


def xla_memory(run_dir: Path) -> dict:
    m = json.loads((run_dir / "memory.json").read_text())
    keys = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
            "temp_size_in_bytes", "peak_memory_in_bytes")
    return {k.replace("_size_in_bytes", "_bytes").replace("_memory_in_bytes", "_bytes"): m.get(k)
            for k in keys}


def run_both_ways(case: Case, tp: Tpuoff, d: Path, text: Path, proto: Optional[Path], inputs: Path,
                  n: int, atol: float, rtol: float) -> None:
    """tpuoff run; XLA on the text (and proto); round trips of XLA's text and proto
    through tpuoff; memory of both sides."""
    ref = d / "tpuoff"
    case.memory["tpuoff_run"] = tp.run(text, inputs, ref, f"{case.cid}: tpuoff run")
    case.memory["tpuoff"] = tp.memory(text, f"{case.cid}: tpuoff memory")
    xla_run.run_module(text, inputs, d / "xla_text", "text", n)
    case.memory["xla"] = xla_memory(d / "xla_text")
    case.compare("xla(text) vs tpuoff", d / "xla_text", ref, atol, rtol)
    # The module as XLA prints it back, run by tpuoff.
    tp.run(d / "xla_text" / "xla_text.hlo", inputs, d / "tpuoff_rt_text", f"{case.cid}: round trip")
    case.compare("tpuoff(XLA's text) vs tpuoff", d / "tpuoff_rt_text", ref, atol, rtol)
    if proto is not None:
        xla_run.run_module(proto, inputs, d / "xla_proto", "proto", n)
        case.compare("xla(proto) vs tpuoff", d / "xla_proto", ref, atol, rtol)
        mod, _ = xla_run.load_module(proto, "proto")
        (d / "xla_written.pb").write_bytes(mod.as_serialized_hlo_module_proto())
        tp.run(d / "xla_written.pb", inputs, d / "tpuoff_rt_proto", f"{case.cid}: proto round trip")
        case.compare("tpuoff(XLA's proto) vs tpuoff", d / "tpuoff_rt_proto", ref, atol, rtol)


def forward_case(tp: Tpuoff, work: Path, kernel: str, mode: str, dtype: str, shard: str) -> Case:
    B, T, V = SHAPES[shard]
    cid = f"{kernel}.{mode}.{dtype}.{shard}"
    case = Case(cid, {"kernel": kernel, "mode": mode, "dtype": dtype, "shard": shard,
                      "shape": {"B": B, "T": T, "V": V}, "devices": MESH if shard != "none" else 1})
    d = work / cid
    try:
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        flags = [f"--kernel={kernel}", f"--mode={mode}", f"--batch={B}", f"--seq={T}", f"--vocab={V}",
                 f"--logits-dtype={dtype}", f"--block-size={BLOCK}"]
        if kernel == "grpo_fused_linear":
            flags += [f"--hidden={HIDDEN}", f"--token-chunk={TOKEN_CHUNK}"]
        if shard != "none":
            flags += [f"--mesh={MESH}", f"--shard={shard}"]
        tp(["dump"] + flags + [f"--out={d / 'module.hlo'}"], f"{cid}: dump text")
        tp(["dump"] + flags + ["--format=proto", f"--out={d / 'module.pb'}"], f"{cid}: dump proto")
        arrays = grpo_inputs.make_inputs(kernel, mode, B, T, V, dtype, seed=zlib.crc32(cid.encode()), H=HIDDEN)
        grpo_inputs.write_inputs(arrays, param_names(d / "module.hlo"), d / "inputs")
        atol, rtol = grpo_inputs.tolerance(kernel, dtype)
        n = MESH if shard != "none" else 1
        run_both_ways(case, tp, d, d / "module.hlo", d / "module.pb", d / "inputs", n, atol, rtol)
        if shard != "none":
            # JAX's global form of the same shard_map, partitioned by XLA itself.
            tp(["dump"] + flags + ["--global-form", f"--out={d / 'global.hlo'}"], f"{cid}: dump global")
            xla_run.run_module(d / "global.hlo", d / "inputs", d / "xla_global", "text", n)
            case.compare("xla(global form) vs tpuoff", d / "xla_global", d / "tpuoff", atol, rtol)
    except Exception as e:  # one broken case must not hide the others
        traceback.print_exc()
        case.fail(e)
    return case


# Kernel parameters beyond the defaults, each checked against the JAX-written math
# (jax_grpo.py: jax.value_and_grad of the loss, for the fused kernel of the unfused
# matmul + loss) on the inputs tpuoff gets: (label, GrpoParams fields, tpuoff flags).
MATH_VARIANTS = [
    ("defaults", {}, []),
    ("temp_clip_kl_delta", {"temperature": 0.7, "eps_low": 0.1, "eps_high": 0.28, "beta": 0.04, "delta": 1.1},
     ["--temperature=0.7", "--eps-low=0.1", "--eps-high=0.28", "--beta=0.04", "--delta=1.1"]),
    ("post_lse_seqmean_onpolicy", {"temperature": 1.3, "temp_mode": "post_lse", "loss_type": "sequence_mean",
                                   "on_policy": True},
     ["--temperature=1.3", "--temperature-mode=post_lse", "--loss-type=sequence_mean", "--on-policy"]),
    ("constant", {"loss_type": "constant", "max_len": 11, "eps_high": 0.35},
     ["--loss-type=constant", "--max-len=11", "--eps-high=0.35"]),
    ("token_count_input", {"total_valid_tokens": 1.0, "beta": 0.1}, ["--token-count-input", "--beta=0.1"]),
    # Policy-loss variants (GRPO_SPEC.md v2); the inputs have an all-masked row and, where
    # named, [B,T] advantages.
    # (token-level IS weights make gspo's row-coupled gradient differ from gspo_token's)
    ("v2_gspo_is_token_skip", {"policy_loss": "gspo", "loss_type": "sequence_mean", "empty_rows": "skip",
                               "is_level": "token", "is_cap": 1.5, "log_ratio_clamp": 0.3},
     ["--policy-loss=gspo", "--loss-type=sequence_mean", "--empty-rows=skip", "--is-level=token",
      "--is-cap=1.5", "--log-ratio-clamp=0.3"]),
    ("v2_gspo_token_k2_entropy_tokenadv", {"policy_loss": "gspo_token", "beta": 0.05, "kl_estimator": "k2",
                                           "entropy_coef": 0.02, "advantage_shape": "token"},
     ["--policy-loss=gspo_token", "--beta=0.05", "--kl-estimator=k2", "--entropy-coef=0.02",
      "--advantage-shape=token"]),
    ("v2_cispo_is_mask_lowvar", {"policy_loss": "cispo", "eps_low": 1.0, "eps_high": 0.28, "is_level": "token",
                                 "is_mode": "mask", "is_cap": 1.2, "beta": 0.1, "kl_estimator": "low_var_kl"},
     ["--policy-loss=cispo", "--eps-low=1.0", "--eps-high=0.28", "--is-level=token", "--is-mode=mask",
      "--is-cap=1.2", "--beta=0.1", "--kl-estimator=low_var_kl"]),
    ("v2_sapo_post_lse_entropy_onpolicy_is", {"policy_loss": "sapo", "sapo_tau_pos": 0.8, "sapo_tau_neg": 1.3,
                                              "temperature": 0.8, "temp_mode": "post_lse", "entropy_coef": 0.03,
                                              "on_policy": True, "is_level": "sequence", "is_mode": "mask"},
     ["--policy-loss=sapo", "--sapo-tau-pos=0.8", "--sapo-tau-neg=1.3", "--temperature=0.8",
      "--temperature-mode=post_lse", "--entropy-coef=0.03", "--on-policy", "--is-level=sequence",
      "--is-mode=mask"]),
    ("v2_ppo_k1_clamp_rows", {"beta": 0.04, "kl_estimator": "k1", "log_ratio_clamp": 0.2, "delta": 1.3,
                              "loss_type": "sequence_mean", "empty_rows": "skip", "total_nonempty_rows": 1.0,
                              "entropy_coef": -0.01, "temperature": 0.9},
     ["--beta=0.04", "--kl-estimator=k1", "--log-ratio-clamp=0.2", "--delta=1.3", "--loss-type=sequence_mean",
      "--empty-rows=skip", "--row-count-input", "--entropy-coef=-0.01", "--temperature=0.9"]),
]
MATH_KERNELS = ("grpo_reference", "grpo_tiled", "grpo_fused_linear")


def math_case(tp: Tpuoff, work: Path, kernel: str, dtype: str, variant: tuple) -> Case:
    """tpuoff's fwd_bwd module vs the JAX-written math of the same loss and gradients."""
    import jax
    import jax.numpy as jnp
    import jax_grpo
    label, fields, vflags = variant
    B, T, V = SHAPES["none"]
    cid = f"{kernel}.fwd_bwd.{dtype}.math_{label}"
    case = Case(cid, {"kernel": kernel, "mode": "fwd_bwd", "dtype": dtype, "shard": f"math_{label}",
                      "shape": {"B": B, "T": T, "V": V}, "devices": 1})
    d = work / cid
    try:
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        fused = kernel == "grpo_fused_linear"
        flags = [f"--kernel={kernel}", "--mode=fwd_bwd", f"--batch={B}", f"--seq={T}", f"--vocab={V}",
                 f"--logits-dtype={dtype}", f"--block-size={BLOCK}"] + vflags
        if fused:
            flags += [f"--hidden={HIDDEN}", f"--token-chunk={TOKEN_CHUNK}"]
        tp(["dump"] + flags + [f"--out={d / 'module.hlo'}"], f"{cid}: dump")
        v2 = label.startswith("v2_")
        arrays = grpo_inputs.make_inputs(kernel, "fwd_bwd", B, T, V, dtype, seed=zlib.crc32(cid.encode()),
                                         H=HIDDEN, token_advantages=fields.get("advantage_shape") == "token",
                                         empty_row=v2)
        gp = jax_grpo.GrpoParams(**fields)
        gp.logits_dtype = dtype
        if gp.total_valid_tokens is not None:
            gp.total_valid_tokens = float(arrays["total_valid_tokens"])
        if gp.total_nonempty_rows is not None:
            gp.total_nonempty_rows = float(arrays["total_nonempty_rows"])
        names = jax_grpo.fused_input_names(gp) if fused else gp.input_names()
        if sorted(names) != sorted(param_names(d / "module.hlo")):
            raise CaseError(f"{cid}: module parameters {param_names(d / 'module.hlo')} vs JAX inputs {names}")
        grpo_inputs.write_inputs(arrays, names, d / "inputs")
        atol, rtol = grpo_inputs.tolerance(kernel, dtype)
        tp.run(d / "module.hlo", d / "inputs", d / "tpuoff", f"{cid}: tpuoff run")

        def jax_array(n):
            a = np.asarray(arrays[n])
            if n in ("logits", "hidden", "lm_head"):
                return a.astype(jnp.bfloat16) if dtype == "bf16" else a.astype(np.float32)
            return a.astype(np.int32) if n == "chosen_ids" else a.astype(np.float32)

        f = jax_grpo.make_fused_value_and_grad(gp) if fused else jax_grpo.make_value_and_grad(gp)
        outs = jax.jit(f)(*[jax_array(n) for n in names])
        out_names = jax_grpo.FUSED_OUTPUT_NAMES if fused else jax_grpo.OUTPUT_NAMES
        (d / "jax").mkdir()
        for n, o in zip(out_names, outs):
            np.save(d / "jax" / f"{n}.npy", np.asarray(o).astype(np.float32))
        case.compare("tpuoff vs jax math", d / "tpuoff", d / "jax", atol, rtol, list(out_names))
    except Exception as e:
        traceback.print_exc()
        case.fail(e)
    return case


def forward_part(tp: Tpuoff, work: Path, shard: str, only: str) -> list:
    cases = []
    if shard == "none":
        for kernel in MATH_KERNELS:
            for dtype in ("f32", "bf16"):
                for variant in MATH_VARIANTS:
                    if only and only not in f"{kernel}.fwd_bwd.{dtype}.math_{variant[0]}":
                        continue
                    c = math_case(tp, work, kernel, dtype, variant)
                    print(c.line(), flush=True)
                    cases.append(c)
    for kernel, modes in KERNEL_MODES.items():
        if shard == "vocab" and kernel not in VOCAB_SHARDABLE:
            continue
        for mode in modes:
            for dtype in ("f32", "bf16"):
                if only and only not in f"{kernel}.{mode}.{dtype}.{shard}":
                    continue
                c = forward_case(tp, work, kernel, mode, dtype, shard)
                print(c.line(), flush=True)
                cases.append(c)
    return cases


def testdata_variants(case: dict, fused: bool) -> list:
    """(label, kernel flags, mode, expected outputs) of the kernels a testdata case applies to."""
    B = case["shape"]["B"]
    grpo_out = ["loss", "per_token_loss", "logp", "entropy", "lse", "dlogits"]
    if fused:
        out = ["loss", "per_token_loss", "logp", "entropy", "lse", "d_hidden", "d_lm_head"]
        v = [("fused", ["--kernel=grpo_fused_linear", "--token-chunk=7"], out, 1),
             ("fused_vocab8", ["--kernel=grpo_fused_linear", f"--mesh={MESH}", "--shard=vocab"], out, MESH)]
        if case.get("logits_dtype") == "bf16":
            # The gradient products on the dlogits tile rounded to bf16, against the same
            # float64 vectors at the case's tolerance.
            v.append(("fused_dlogits_bf16", ["--kernel=grpo_fused_linear", "--token-chunk=7",
                                             "--dlogits-dtype=bf16"], out, 1))
        return v
    v = [("reference", ["--kernel=grpo_reference"], grpo_out, 1),
         ("tiled", ["--kernel=grpo_tiled", "--block-size=16"], grpo_out, 1),
         ("tiled_vocab8", ["--kernel=grpo_tiled", "--block-size=4", f"--mesh={MESH}", "--shard=vocab"],
          grpo_out, MESH)]
    if B > 1:
        v.append((f"tiled_batch{B}", ["--kernel=grpo_tiled", "--block-size=16", f"--mesh={B}",
                                      "--shard=batch"], grpo_out, B))
    entropy_flags = [f for f in grpo_inputs.case_flags(case)
                     if f.split("=")[0] in ("--batch", "--seq", "--vocab", "--logits-dtype", "--temperature")]
    v.append(("entropy_tiled", ["--kernel=entropy_tiled", "--block-size=16", "--mode=fwd"] + entropy_flags,
              ["entropy"], 1))
    return v


def testdata_part(tp: Tpuoff, work: Path, testdata: Path, only: str, v2: bool = False) -> list:
    cases = []
    folders = ("grpo_v2", "grpo_fused_v2") if v2 else ("grpo", "grpo_fused")
    dirs = []
    for folder in folders:
        dirs += sorted(p.parent for p in (testdata / folder).glob("*/case.json"))
    if not dirs:
        raise SystemExit(f"conformance: no testdata cases under {testdata} ({', '.join(folders)})")
    for cd in dirs:
        spec = json.loads((cd / "case.json").read_text())
        fused = cd.parent.name.startswith("grpo_fused")
        atol, rtol = spec["tolerance"]["atol"], spec["tolerance"]["rtol"]
        for label, kflags, outputs, n in testdata_variants(spec, fused):
            cid = f"{cd.parent.name}/{cd.name}.{label}"
            if only and only not in cid:
                continue
            case = Case(cid, {"kernel": kflags[0].split("=")[1], "mode": "fwd_bwd" if len(outputs) > 1 else "fwd",
                              "dtype": spec.get("logits_dtype", "f32"), "shard": label, "shape": spec["shape"],
                              "devices": n, "testdata": cd.name})
            d = work / cd.parent.name / f"{cd.name}.{label}"
            try:
                if d.exists():
                    shutil.rmtree(d)
                d.mkdir(parents=True)
                flags = kflags if label == "entropy_tiled" else (
                    kflags + ["--mode=fwd_bwd"] + grpo_inputs.case_flags(spec))
                tp(["dump"] + flags + [f"--out={d / 'module.hlo'}"], f"{cid}: dump")
                (d / "inputs").mkdir()
                for nm in param_names(d / "module.hlo"):
                    shutil.copy(cd / spec["inputs"][nm]["file"], d / "inputs" / f"{nm}.npy")
                run_both_ways(case, tp, d, d / "module.hlo", None, d / "inputs", n, atol, rtol)
                case.compare("xla vs expected", d / "xla_text", cd, atol, rtol, outputs, "expected_")
                case.compare("tpuoff vs expected", d / "tpuoff", cd, atol, rtol, outputs, "expected_")
            except Exception as e:
                traceback.print_exc()
                case.fail(e)
            print(case.line(), flush=True)
            cases.append(case)
    return cases


def reverse_part(tp: Tpuoff, work: Path, testdata: Path, only: str) -> tuple:
    import jax_grpo
    cases, opcodes, targets, kinds = [], {}, set(), set()
    dirs = sorted(p.parent for p in (testdata / "grpo").glob("*/case.json"))
    if not dirs:
        raise SystemExit(f"conformance: no testdata cases under {testdata}/grpo")
    for cd in dirs:
        spec = json.loads((cd / "case.json").read_text())
        atol, rtol = spec["tolerance"]["atol"], spec["tolerance"]["rtol"]
        for chosen in ("onehot", "gather"):
            cid = f"{cd.name}.{chosen}"
            if only and only not in cid:
                continue
            case = Case(cid, {"testdata": cd.name, "chosen": chosen, "dtype": spec.get("logits_dtype", "f32"),
                              "shape": spec["shape"]})
            d = work / cid
            try:
                if d.exists():
                    shutil.rmtree(d)
                jax_grpo.dump_case(cd, d / "pre_opt.hlo", d / "post_opt.hlo", d / "inputs", d / "jax_outputs",
                                   chosen, post_default=d / "post_opt_default.hlo")
                case.compare("jax vs expected", d / "jax_outputs", cd, atol, rtol, None, "expected_")
                for v in ("pre_opt", "post_opt", "post_opt.nometa", "post_opt_default"):
                    tp.run(d / f"{v}.hlo", d / "inputs", d / f"tpuoff_{v}", f"{cid}: tpuoff run {v}")
                    case.compare(f"tpuoff({v}) vs jax", d / f"tpuoff_{v}", d / "jax_outputs", atol, rtol)
                    case.compare(f"tpuoff({v}) vs expected", d / f"tpuoff_{v}", cd, atol, rtol, None, "expected_")
                    text = (d / f"{v}.hlo").read_text()
                    mod, _ = xla_run.load_module(d / f"{v}.hlo", "text")
                    for k, c in xla_run.opcodes_of_module(mod).items():
                        opcodes.setdefault(v.replace(".nometa", ""), {}).setdefault(k, 0)
                        opcodes[v.replace(".nometa", "")][k] += c
                    targets.update(re.findall(r'custom_call_target="([^"]+)"', text))
                    kinds.update(re.findall(r"\bkind=(k\w+)", text))
            except Exception as e:
                traceback.print_exc()
                case.fail(e)
            print(case.line(), flush=True)
            cases.append(case)
    return cases, {"opcodes": {k: dict(sorted(v.items())) for k, v in opcodes.items()},
                   "custom_call_targets": sorted(targets), "fusion_kinds": sorted(kinds)}


def corpus_part(tp: Tpuoff, work: Path, corpus: Path, only: str) -> tuple:
    """tests/corpus modules on XLA and tpuoff with the same random inputs.  Modules XLA
    cannot take (tpuoff's lenient syntax, bitcasts before layout assignment, unknown
    custom-calls) or the harness does not feed (tuple parameters, SPMD modules) are
    listed with the reason; every module both run must agree."""
    cases, skipped = [], {}
    for f in sorted(corpus.glob("*.hlo")):
        cid = f"corpus/{f.stem}"
        if only and only not in cid:
            continue
        text = f.read_text()
        if "custom-call(" in text:
            skipped[f.name] = "custom-calls (no target is known to the emulator)"
            continue
        if re.search(r" (rng|rng-get-and-update-state)\(", text):
            skipped[f.name] = ("rng / rng-get-and-update-state: XLA draws their key when it "
                               "compiles, so no two runs agree; these ops are checked against "
                               "XLA:CPU in xla_corpus (corpus_programs_hlo.py)")
            continue
        try:
            mod, _ = xla_run.load_module(f, "text")
            info = xla_run.module_info(mod)
        except xla_run.HarnessError as e:
            skipped[f.name] = f"not loadable by XLA/the harness: {str(e).splitlines()[0][-200:]}"
            continue
        if (info.num_partitions_attr or 1) > 1:
            skipped[f.name] = ("SPMD module whose shardings are illustrative (its outputs are not "
                               "reassemblable); partitioned modules: forward-batch/-vocab, selftest")
            continue
        case = Case(cid, {"corpus": f.name})
        d = work / cid
        try:
            if d.exists():
                shutil.rmtree(d)
            (d / "inputs").mkdir(parents=True)
            rng = np.random.default_rng(zlib.crc32(f.name.encode()))
            for p in info.params:
                shape = p.shape
                if p.dtype.kind == "b":
                    a = rng.random(shape) < 0.5
                elif p.dtype.kind in "iu":  # small indices; tpuoff reads unsigned from int64
                    a = rng.integers(0, 4, shape).astype(np.int64 if p.dtype.kind == "u" else p.dtype)
                else:
                    a = rng.standard_normal(shape).astype(np.float32)
                    a = grpo_inputs.to_bf16_exact(a) if p.dtype.name == "bfloat16" else a.astype(
                        p.dtype if p.dtype.itemsize >= 4 else np.float32)
                np.save(d / "inputs" / f"{p.name}.npy", a)
            tp.run(f, d / "inputs", d / "tpuoff", f"{cid}: tpuoff run")
            try:
                xla_run.run_module(f, d / "inputs", d / "xla", "text", None)
            except Exception as e:  # XLA's compiler refuses what its parser took
                if "layout assignment" not in str(e) and "minor_to_major" not in str(e):
                    raise
                skipped[f.name] = f"XLA does not compile it: {str(e).splitlines()[0][-200:]}"
                continue
            case.compare("tpuoff vs xla", d / "tpuoff", d / "xla", 1e-5, 1e-4)
        except Exception as e:
            traceback.print_exc()
            case.fail(e)
        print(case.line(), flush=True)
        cases.append(case)
    for k, v in skipped.items():
        print(f"not compared: corpus/{k}: {v}")
    return cases, skipped


def versions() -> dict:
    import importlib.metadata as md
    out = {}
    for line in (HERE / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name = line.split("==")[0]
            out[name] = md.version(name)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", required=True, choices=list(conformance_report.PARTS)
                    + list(conformance_report.OPTIONAL_PARTS) + ["report"])
    ap.add_argument("--tpuoff", help="the tpuoff binary (all parts but report)")
    ap.add_argument("--out", required=True, help="work dir; the report goes next to it")
    ap.add_argument("--testdata", default=str(HERE.parents[1] / "tests" / "testdata"),
                    help="vector set of the testdata/reverse parts (default: tests/testdata)")
    ap.add_argument("--expect", nargs="*", default=[], choices=conformance_report.OPTIONAL_PARTS,
                    help="report: optional parts that must be present too")
    ap.add_argument("--only", default="", help="run only cases whose id contains this")
    a = ap.parse_args(argv)
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if a.part == "report":
        return conformance_report.finish(out, required=conformance_report.PARTS + tuple(a.expect))
    if not a.tpuoff or not os.access(a.tpuoff, os.X_OK):
        raise SystemExit(f"conformance: --tpuoff {a.tpuoff!r} is not an executable")
    xla_run.ensure_cpu_devices(MESH)
    tp = Tpuoff(a.tpuoff)
    t0 = time.time()
    work = out / a.part
    extra: dict = {}
    testdata = Path(a.testdata)
    if a.part.startswith("forward-"):
        cases = forward_part(tp, work, a.part.split("-", 1)[1], a.only)
    elif a.part.startswith("testdata"):
        cases = testdata_part(tp, work, testdata, a.only, v2=a.part.startswith("testdata-v2"))
    else:
        cases, extra = reverse_part(tp, work, testdata, a.only)
        if a.part == "reverse":
            corpus_cases, extra["corpus_not_compared"] = corpus_part(
                tp, work, HERE.parents[1] / "tests" / "corpus", a.only)
            cases += corpus_cases
    doc = {"part": a.part, "testdata": str(testdata), "versions": versions(), "seconds": round(time.time() - t0, 1),
           "passed": sum(c.ok for c in cases), "failed": sum(not c.ok for c in cases),
           "only": a.only, "cases": [c.to_json() for c in cases], **extra}
    conformance_report.write_part(out, doc)
    conformance_report.finish(out, required=())
    print(f"{a.part}: {doc['passed']} passed, {doc['failed']} failed in {doc['seconds']}s")
    return 0 if doc["failed"] == 0 and doc["passed"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())

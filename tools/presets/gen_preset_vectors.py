#!/usr/bin/env python3
"""Test vectors for tpuoff's loss presets, computed with the trainers' own semantics.

  gen_preset_vectors.py [--out DIR]     write the cases (default tests/testdata_presets)
  gen_preset_vectors.py --check DIR     regenerate into a temporary directory and require
                                        the same files: inputs and case.json byte-identical,
                                        expected outputs within 1e-6 relative (XLA:CPU's
                                        float64 transcendentals may differ in the last bits
                                        between CPUs)

Each case is one trainer configuration (trainer_losses.py: TRL, verl, Tunix) on random
inputs, with the `preset` (and `params` on top of it) that should make a tpuoff kernel
compute the same loss, per-token loss and gradient.  Inputs are redrawn until no token
lies within 1e-3 (log-ratio or KL-difference units) of a clip, clamp or cap boundary.
Needs the XLA harness venv (jax, float64): PY=$(tools/xla_check/setup_venv.sh | tail -1).
"""
from __future__ import annotations

import argparse
import filecmp
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import trainer_losses as tl  # noqa: E402

DEFAULT_OUT = HERE.parents[1] / "tests" / "testdata_presets"
MARGIN = 1e-3
TOL = {"f32": (1e-5, 1e-4), "bf16": (2e-3, 2e-2)}
FUSED_TOL = {"f32": (1e-4, 1e-3)}
LOWVAR_K_ROOTS = (2.6108, -10.9999)  # e^d - d - 1 = 10 (refined below)

TRL_SRC = "huggingface/trl trl/trainer/grpo_trainer.py GRPOTrainer._compute_loss"
VERL_SRC = "volcengine/verl verl/trainer/ppo/core_algos.py + workers/actor/dp_actor.py"
TUNIX_SRC = "google/tunix tunix/rl/algo_core.py grpo_loss_fn"

# name, preset, tpuoff params over it, trainer, trainer config (beyond its defaults),
# inputs beyond logits/chosen_ids/completion_mask/advantages, options.
CASES = [
    dict(name="trl_grpo", preset="trl-grpo", params={}, trainer="trl",
         cfg={"loss_type": "grpo"}, inputs=["old_logp"]),
    dict(name="trl_grpo_vllm_is_kl", preset="trl-grpo", params={"is_level": "sequence", "beta": 0.04},
         trainer="trl", cfg={"loss_type": "grpo", "beta": 0.04, "use_vllm": True},
         inputs=["old_logp", "ref_logp", "sampler_logp"], expect=["is_zeroed"]),
    dict(name="trl_dapo", preset="trl-dapo", params={}, trainer="trl",
         cfg={"loss_type": "dapo", "epsilon_high": 0.28}, inputs=["old_logp", "total_valid_tokens"]),
    dict(name="trl_dr_grpo_onpolicy", preset="trl-dr-grpo", params={}, trainer="trl",
         cfg={"loss_type": "dr_grpo"}, inputs=[], on_policy=True),
    dict(name="trl_gspo", preset="trl-gspo", params={}, trainer="trl",
         cfg={"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 3e-4,
              "epsilon_high": 4e-4}, inputs=["old_logp"], expect=["gspo_live"]),
    dict(name="verl_grpo", preset="verl-grpo", params={}, trainer="verl", cfg={},
         inputs=["old_logp"], expect=["dual_clip"]),
    dict(name="verl_grpo_kl_rollout_is", preset="verl-grpo", params={"beta": 0.05, "is_level": "token"},
         trainer="verl", cfg={"use_kl_loss": True, "kl_loss_coef": 0.05, "rollout_is": "token"},
         inputs=["old_logp", "ref_logp", "sampler_logp"], expect=["dual_clip", "kl_clipped", "is_capped"]),
    dict(name="verl_gspo", preset="verl-gspo", params={}, trainer="verl",
         cfg={"loss_mode": "gspo", "clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4},
         inputs=["old_logp"], expect=["gspo_live"]),
    dict(name="verl_gspo_bf16", preset="verl-gspo", params={}, trainer="verl",
         cfg={"loss_mode": "gspo", "clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4},
         inputs=["old_logp"], dtype="bf16"),
    dict(name="tunix_grpo", preset="tunix-grpo", params={}, trainer="tunix", cfg={},
         inputs=["old_logp", "ref_logp"]),
    dict(name="tunix_grpo_sampler_is", preset="tunix-grpo", params={"is_level": "token"}, trainer="tunix",
         cfg={"sampler_is": "token"}, inputs=["old_logp", "ref_logp", "sampler_logp"], expect=["is_capped"]),
    dict(name="fused_trl_gspo", preset="trl-gspo", params={}, trainer="trl",
         cfg={"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 3e-4,
              "epsilon_high": 4e-4}, inputs=["old_logp"], fused_hidden=24),
]


def _lowvar_roots():
    roots = []
    for x in LOWVAR_K_ROOTS:
        for _ in range(60):
            x -= (np.exp(x) - x - 11.0) / (np.exp(x) - 1.0)
        roots.append(float(x))
    return roots


def to_bf16_exact(a):
    import ml_dtypes
    return a.astype(ml_dtypes.bfloat16).astype(np.float64)


def draw(case: dict, seed: int) -> dict:
    """Inputs (float64, int32 ids) of one case for one seed."""
    rng = np.random.default_rng(seed)
    B, T, V = 4, 9, 300
    H = case.get("fused_hidden")
    bf16 = case.get("dtype") == "bf16"
    out = {}
    if H:
        out["hidden"] = rng.standard_normal((B, T, H)) * 0.8
        out["lm_head"] = rng.standard_normal((H, V)) * (2.5 / np.sqrt(H))
        logits = out["hidden"] @ out["lm_head"]
    else:
        logits = 2.5 * rng.standard_normal((B, T, V))
        if bf16:
            logits = to_bf16_exact(logits)
        out["logits"] = logits
    y = rng.integers(0, V, (B, T)).astype(np.int32)
    lengths = [T, 1 + rng.integers(T // 2, T), 0, 2 + rng.integers(0, T - 2)]  # row 2 empty
    mask = (np.arange(T)[None, :] < np.array(lengths)[:, None]).astype(np.float64)
    adv = rng.standard_normal(B)
    adv[0], adv[1] = abs(adv[0]) + 0.3, -abs(adv[1]) - 0.3  # both signs
    x = logits - logits.max(-1, keepdims=True)
    logp = np.take_along_axis(x - np.log(np.exp(x).sum(-1, keepdims=True)), y[..., None], -1)[..., 0]
    delta = 0.35 * rng.standard_normal((B, T))
    delta[1, 0], delta[0, 1] = 1.6, -1.4  # a ratio above 3 (dual clip, A < 0) and a small one
    old = logp - delta
    d_ref = 0.3 * rng.standard_normal((B, T))
    d_ref[0, 2], d_ref[1, 1] = 3.2, -0.9  # low_var_kl's estimate clipped at 10 for d = 3.2
    out.update({"chosen_ids": y, "completion_mask": mask, "advantages": adv})
    if "old_logp" in case["inputs"]:
        out["old_logp"] = old
    if "ref_logp" in case["inputs"]:
        out["ref_logp"] = logp + d_ref
    if "sampler_logp" in case["inputs"]:
        out["sampler_logp"] = old - 0.45 * rng.standard_normal((B, T))
    if "total_valid_tokens" in case["inputs"]:
        out["total_valid_tokens"] = np.float64(mask.sum() + 9.0)
    out["_logp"] = logp
    return out


def margins_ok(case: dict, inp: dict) -> tuple:
    """(ok, counts): distances to every boundary the case's trainer has, and what the
    case exercises."""
    cfg, trainer = case["cfg"], case["trainer"]
    logp, m = inp["_logp"], inp["completion_mask"]
    on = m > 0
    A = inp["advantages"][:, None] + 0 * logp
    counts = {"tokens": int(on.sum()), "empty_rows": int((m.sum(-1) == 0).sum())}
    bounds = []
    if trainer == "trl":
        lo, hi = cfg.get("epsilon", 0.2), cfg.get("epsilon_high") or cfg.get("epsilon", 0.2)
    elif trainer == "verl":
        lo, hi = cfg.get("clip_ratio_low", 0.2), cfg.get("clip_ratio_high", 0.2)
    else:
        lo = hi = 0.2
    lr = logp - inp["old_logp"] if "old_logp" in inp else 0 * logp
    seq_level = cfg.get("importance_sampling_level") == "sequence" or cfg.get("loss_mode") == "gspo"
    if seq_level:
        mean = (lr * m).sum(-1) / np.maximum(m.sum(-1), 1)
        units = np.broadcast_to(mean[:, None], lr.shape)
        live = ((A > 0) & (units < np.log1p(hi))) | ((A < 0) & (units > np.log1p(-lo)))
        counts["gspo_live"] = int((live & on).sum())
    else:
        units = lr
    # Gradients jump at these boundaries, values do not: only tokens in the loss matter.
    bounds += [np.abs(units - np.log1p(-lo))[on], np.abs(units - np.log1p(hi))[on]]
    if trainer == "verl" and cfg.get("loss_mode", "vanilla") == "vanilla":
        bounds.append(np.abs(lr - np.log(cfg.get("clip_ratio_c", 3.0)))[on])
        counts["dual_clip"] = int(((lr > np.log(3.0)) & (A < 0) & on).sum())
    if "sampler_logp" in inp:
        lw = inp["old_logp"] - inp["sampler_logp"]
        if cfg.get("use_vllm") or cfg.get("rollout_is") == "sequence":
            lw = np.broadcast_to((lw * m).sum(-1, keepdims=True), lw.shape)
        cap = {"trl": cfg.get("vllm_importance_sampling_clip_max", 3.0),
               "verl": cfg.get("rollout_is_threshold", 2.0),
               "tunix": cfg.get("sampler_is_threshold", 2.0)}[trainer]
        bounds.append(np.abs(lw - np.log(cap)))  # a masked weight jumps to 0: every token
        key = "is_zeroed" if trainer == "trl" else "is_capped"
        counts[key] = int(((lw > np.log(cap)) & on).sum())
    if "ref_logp" in inp and cfg.get("use_kl_loss"):
        d = inp["ref_logp"] - logp
        bounds += [np.abs(np.abs(d) - 20.0)[on]] + [np.abs(d - r)[on] for r in _lowvar_roots()]
        counts["kl_clipped"] = int(((np.exp(d) - d - 1 > 10.0) & on).sum())
    worst = min(float(b.min()) for b in bounds)
    counts["min_boundary_distance"] = round(worst, 4)
    return worst >= MARGIN, counts


def f32(a):
    return np.asarray(a, dtype=np.float32)


def npy_bytes(a) -> bytes:
    import io
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def build(case: dict) -> dict:
    """{file name: bytes} of one case directory."""
    import jax.numpy as jnp
    for seed in range(1000, 1200):
        inp = draw(case, seed + sum(map(ord, case["name"])))
        ok, counts = margins_ok(case, inp)
        if ok and all(counts.get(k, 0) > 0 for k in case.get("expect", [])) and counts["empty_rows"] == 1:
            break
    else:
        raise AssertionError(f"{case['name']}: no seed gives inputs away from every boundary")
    on_policy = case.get("on_policy", False)
    dtype = case.get("dtype", "f32")
    fused = "hidden" in inp
    jin = {k: jnp.asarray(v) for k, v in inp.items() if not k.startswith("_") and k not in ("hidden", "lm_head")}
    if fused:
        jin["logits"] = jnp.asarray(inp["hidden"] @ inp["lm_head"])
    if "total_valid_tokens" in inp:
        jin["num_items_in_batch"] = jin.pop("total_valid_tokens")
    got = {k: np.asarray(v) for k, v in tl.outputs(case["trainer"], case["cfg"], jin).items()}
    if fused:
        dz = got.pop("dlogits").reshape(-1, inp["lm_head"].shape[1])
        h = inp["hidden"].reshape(-1, inp["hidden"].shape[2])
        got["d_hidden"] = (dz @ inp["lm_head"].T).reshape(inp["hidden"].shape)
        got["d_lm_head"] = h.T @ dz
    files, inputs, expected = {}, {}, {}
    names = (["hidden", "lm_head"] if fused else ["logits"]) + [
        "chosen_ids", "completion_mask", "advantages"] + case["inputs"]
    for n in names:
        a = inp[n].astype(np.int32) if n == "chosen_ids" else f32(inp[n])
        files[f"{n}.npy"] = npy_bytes(a)
        inputs[n] = {"file": f"{n}.npy", "shape": list(a.shape), "dtype": str(a.dtype)}
    for n, v in got.items():
        files[f"expected_{n}.npy"] = npy_bytes(f32(v))
        expected[n] = {"file": f"expected_{n}.npy", "shape": list(np.shape(v))}
    B, T = inp["chosen_ids"].shape
    shape = {"B": int(B), "T": int(T), "V": int((inp["lm_head"] if fused else inp["logits"]).shape[-1])}
    if fused:
        shape["H"] = int(inp["hidden"].shape[2])
    atol, rtol = (FUSED_TOL if fused else TOL)[dtype]
    src = {"trl": TRL_SRC, "verl": VERL_SRC, "tunix": TUNIX_SRC}[case["trainer"]]
    doc = {"kernel": "grpo_fused_linear" if fused else "grpo", "shape": shape, "logits_dtype": dtype,
           "on_policy": on_policy, "preset": case["preset"], "params": case["params"],
           "trainer": {"name": case["trainer"], "config": case["cfg"], "source": src},
           "inputs": inputs, "expected": expected, "tolerance": {"atol": atol, "rtol": rtol},
           "notes": "exercises " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))}
    files["case.json"] = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
    return files


def readme(index: list) -> bytes:
    lines = ["# tpuoff preset vectors (generated)", "",
             "Written by `tools/presets/gen_preset_vectors.py`: each case is one trainer's loss (TRL, verl,",
             "Tunix) as its source computes it (`tools/presets/trainer_losses.py`, JAX float64 with",
             "jax.grad), and names the `preset` (plus `params` over it) that makes a tpuoff kernel compute",
             "the same. Layout as `tests/testdata/README.md`, plus `preset` and `trainer` in case.json.",
             "Do not edit by hand; the ctest `presets_vectors_regenerate` fails when these files differ",
             "from a fresh generation.", "",
             "| case | preset | params | trainer config | notes |", "|---|---|---|---|---|"]
    for name, doc in index:
        params = ", ".join(f"{k}={v}" for k, v in sorted(doc["params"].items())) or "-"
        cfg = ", ".join(f"{k}={v}" for k, v in sorted(doc["trainer"]["config"].items())) or "defaults"
        lines.append(f"| {name} | {doc['preset']} | {params} | {doc['trainer']['name']}: {cfg} | "
                     f"{doc['logits_dtype']}, {'on' if doc['on_policy'] else 'off'}-policy; {doc['notes']} |")
    return ("\n".join(lines) + "\n").encode()


def generate(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    index = []
    for case in CASES:
        files = build(case)
        d = out / case["name"]
        d.mkdir(exist_ok=True)
        for old in d.iterdir():
            if old.name not in files:
                old.unlink()
        for fname, data in files.items():
            (d / fname).write_bytes(data)
        index.append((case["name"], json.loads(files["case.json"])))
        print(f"{case['name']}: {json.loads(files['case.json'])['notes']}", flush=True)
    (out / "README.md").write_bytes(readme(index))


def check(against: Path) -> int:
    problems = []
    with tempfile.TemporaryDirectory(prefix="tpuoff_presets_") as tmp:
        fresh = Path(tmp)
        generate(fresh)
        want = {str(p.relative_to(fresh)) for p in fresh.rglob("*") if p.is_file()}
        have = {str(p.relative_to(against)) for p in against.rglob("*") if p.is_file()}
        problems += [f"missing {f}" for f in sorted(want - have)] + [f"extra {f}" for f in sorted(have - want)]
        for f in sorted(want & have):
            if Path(f).name.startswith("expected_"):
                a, b = np.load(fresh / f), np.load(against / f)
                if a.shape != b.shape or not np.allclose(a, b, rtol=1e-6, atol=1e-9):
                    problems.append(f"differs {f}")
            elif not filecmp.cmp(fresh / f, against / f, shallow=False):
                problems.append(f"differs {f}")
    if problems:
        print(f"FAIL: {against} is not what gen_preset_vectors.py generates:\n  " + "\n  ".join(problems[:40]))
        return 1
    print(f"PASS: {len(want)} files in {against} agree with a fresh generation")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--out", type=Path, default=None)
    g.add_argument("--check", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.check is not None:
        return check(a.check)
    generate(a.out or DEFAULT_OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())

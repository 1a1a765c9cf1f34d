"""`tpuoff cost --counting=xla` against XLA's own HloCostAnalysis.

For every module, XLA's numbers come from jaxlib's
`hlo_module_cost_analysis(client, hlo_module_from_text(text))` (the CPU
client's HloCostAnalysis on the module as parsed, no passes), tpuoff's from
`tpuoff cost MODULE --counting=xla --json`. flops, transcendentals and bytes
accessed must agree within 1% (absolute slack of 1 for tiny counts) on every
loop-free module: the kernels (every kernel and mode, unsharded and
batch/vocab-sharded, at shapes where the tiled kernels need no loop) and every
module form of the JAX corpus (tools/xla_check/jax_corpus.py: jax.hlo,
before.hlo, opt.hlo); programs the corpus marks unsupported (complex types)
(element types tpuoff does not take) must be refused with its message. Modules with while loops are compared too and reported,
but only loop-free ones decide the exit status.

  python cost_check.py --tpuoff build/tools/tpuoff --work DIR [--corpus DIR [--generate]]
"""
import argparse
import json
import os
import re
import subprocess
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
from jax._src.lib import xla_client as xc  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KEYS = (("flops", "flops"), ("transcendentals", "transcendentals"),
        ("bytes accessed", "bytes_accessed"))
TOL = 0.01


def xla_costs(text):
    if hasattr(xc._xla, "hlo_module_from_text"):
        module = xc._xla.hlo_module_from_text(text)
    else:
        module = xc.hlo.hlo_module_from_text(text)  # noqa
    fn = getattr(xc._xla, "hlo_module_cost_analysis", None)
    if fn is None:
        raise SystemExit("cost_check: jaxlib has no hlo_module_cost_analysis; pin a version that does")
    client = jax.devices("cpu")[0].client
    return fn(client, module)


def tpuoff_costs(tpuoff, path):
    r = subprocess.run([tpuoff, "cost", path, "--counting=xla", "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return json.loads(r.stdout), None


def has_loop(text):
    return re.search(r"\bwhile\(", text) is not None


def compare(name, path, tpuoff, unsupported=None):
    text = open(path).read()
    row = {"name": name, "loop_free": not has_loop(text)}
    if unsupported:
        # A program the corpus marks as beyond tpuoff's IR:
        # cost must refuse it the same way every other command does.
        got, err = tpuoff_costs(tpuoff, path)
        ok = got is None and re.search(unsupported, err or "")
        row["status"] = "refused" if ok else "not-refused"
        row["error"] = (err or "accepted")[:200]
        return row
    try:
        want = xla_costs(text)
    except Exception as e:  # XLA refuses the module (e.g. elided constants it cannot parse)
        row["status"] = "xla-error"
        row["error"] = str(e).splitlines()[0][:200]
        return row
    got, err = tpuoff_costs(tpuoff, path)
    if got is None:
        row["status"] = "tpuoff-error"
        row["error"] = err[:300]
        return row
    worst = 0.0
    for xk, tk in KEYS:
        w = float(want.get(xk, 0.0))
        g = float(got[tk])
        diff = abs(g - w)
        rel = 0.0 if diff <= 1.0 else diff / max(abs(w), 1.0)
        row[tk] = {"xla": w, "tpuoff": g, "rel": rel}
        worst = max(worst, rel)
    row["worst_rel"] = worst
    row["status"] = "ok" if worst <= TOL else "mismatch"
    return row


KERNEL_CASES = [
    # (name, flags): shapes small enough for straight-line tiled kernels
    # (at most one full vocab tile) and, with a larger V, their loop forms.
]
for kernel in ("grpo_reference", "grpo_tiled", "entropy_reference", "entropy_tiled"):
    modes = ("fwd",) if kernel.startswith("entropy") else ("fwd", "bwd", "fwd_bwd")
    for mode in modes:
        for dtype in ("f32", "bf16"):
            base = [f"--kernel={kernel}", f"--mode={mode}", "--batch=8", "--seq=16",
                    f"--logits-dtype={dtype}"]
            KERNEL_CASES.append((f"{kernel}.{mode}.{dtype}", base + ["--vocab=3000"]))
            if kernel.endswith("tiled"):
                KERNEL_CASES.append((f"{kernel}.{mode}.{dtype}.vocab8",
                                     base + ["--vocab=3000", "--mesh=8", "--shard=vocab"]))
                KERNEL_CASES.append((f"{kernel}.{mode}.{dtype}.loop",
                                     base + ["--vocab=9000", "--block-size=2048"]))
            KERNEL_CASES.append((f"{kernel}.{mode}.{dtype}.batch8",
                                 base + ["--vocab=3000", "--mesh=8", "--shard=batch"]))
# Loss options change the arithmetic around the vocab statistics.
OPTIONS = {
    "kl_delta_post_lse_seqmean": ["--beta=0.04", "--delta=2", "--temperature=0.7",
                                  "--temperature-mode=post_lse", "--loss-type=sequence_mean"],
    "on_policy_constant": ["--on-policy", "--loss-type=constant", "--max-len=32"],
    "token_count_input": ["--token-count-input", "--temperature=1.3"],
}
for kernel in ("grpo_reference", "grpo_tiled", "grpo_fused_linear"):
    for oname, opts in OPTIONS.items():
        extra = ["--hidden=64"] if kernel == "grpo_fused_linear" else []
        KERNEL_CASES.append((f"{kernel}.fwd_bwd.bf16.{oname}",
                             [f"--kernel={kernel}", "--mode=fwd_bwd", "--batch=4", "--seq=16",
                              "--logits-dtype=bf16", "--vocab=3000", *extra, *opts]))
for mode in ("fwd", "fwd_bwd"):
    for dtype in ("f32", "bf16"):
        base = ["--kernel=grpo_fused_linear", f"--mode={mode}", "--batch=2", "--seq=16",
                "--hidden=64", f"--logits-dtype={dtype}", "--vocab=3000"]
        KERNEL_CASES.append((f"grpo_fused_linear.{mode}.{dtype}", base))
        KERNEL_CASES.append((f"grpo_fused_linear.{mode}.{dtype}.vocab8",
                             base + ["--mesh=8", "--shard=vocab"]))


def kernel_rows(tpuoff, work):
    rows = []
    os.makedirs(work, exist_ok=True)
    for name, flags in KERNEL_CASES:
        path = os.path.join(work, name + ".hlo")
        r = subprocess.run([tpuoff, "dump", *flags, "--format=text", f"--out={path}"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            rows.append({"name": "kernel " + name, "status": "dump-error", "loop_free": True,
                         "error": r.stderr.strip()[:300]})
            continue
        rows.append(compare("kernel " + name, path, tpuoff))
    return rows


def corpus_rows(tpuoff, corpus):
    rows = []
    for prog in sorted(os.listdir(corpus)):
        d = os.path.join(corpus, prog)
        if not os.path.isdir(d):
            continue
        meta = {}
        if os.path.exists(os.path.join(d, "case.json")):
            with open(os.path.join(d, "case.json")) as f:
                meta = json.load(f)
        for form in ("jax.hlo", "before.hlo", "opt.hlo"):
            path = os.path.join(d, form)
            if os.path.exists(path):
                rows.append(compare(f"corpus {prog}/{form}", path, tpuoff,
                                    meta.get("unsupported")))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpuoff", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--corpus")
    ap.add_argument("--generate", action="store_true",
                    help="(re)generate the corpus with jax_corpus.py first")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = kernel_rows(a.tpuoff, os.path.join(a.work, "kernels"))
    if a.corpus:
        if a.generate or not os.path.isdir(a.corpus):
            subprocess.run([sys.executable, os.path.join(HERE, "jax_corpus.py"), "--out", a.corpus],
                           check=True)
        rows += corpus_rows(a.tpuoff, a.corpus)
    bad = []
    for r in rows:
        tag = "" if r["loop_free"] else " (loops)"
        if r["status"] == "ok" or r["status"] == "mismatch":
            detail = "  ".join(
                f"{k}: xla {r[k]['xla']:.6g} tpuoff {r[k]['tpuoff']:.6g}"
                for _, k in KEYS if r[k]["rel"] > 0)
            print(f"{r['status']:9s} {r['worst_rel']*100:8.4f}%  {r['name']}{tag}  {detail}")
        else:
            print(f"{r['status']:9s}           {r['name']}{tag}: {r.get('error', '')}")
        if r["status"] == "refused":
            continue
        if r["loop_free"] and r["status"] != "ok":
            # XLA refusing a module it wrote itself (elided constants) is not ours to fix.
            if r["status"] == "xla-error" and r["name"].endswith("before.hlo"):
                continue
            bad.append(r["name"])
    n_refused = sum(1 for r in rows if r["status"] == "refused")
    n_free = sum(1 for r in rows if r["loop_free"] and r["status"] != "refused")
    n_ok = sum(1 for r in rows if r["loop_free"] and r["status"] == "ok")
    n_loop_ok = sum(1 for r in rows if not r["loop_free"] and r["status"] == "ok")
    print(f"\nloop-free modules within {TOL*100:.0f}%: {n_ok}/{n_free}; "
          f"modules with loops that also agree: {n_loop_ok}/"
          f"{sum(1 for r in rows if not r['loop_free'] and r['status'] != 'refused')}; "
          f"refused as known unsupported: {n_refused}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if bad:
        print("FAILED: " + ", ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

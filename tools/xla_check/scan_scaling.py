"""Time of a lax.scan that writes a [16, 256] slice of its stacked output per
step (dynamic-update-slice in a while loop), on tpuoff and on jax, for
growing T: in-place updates make both linear in T (issue 16).

  python scan_scaling.py --tpuoff build/tools/tpuoff [--steps 100,200,400,800,1600]

Prints one row per T and form (jax.hlo, XLA:CPU's opt.hlo): tpuoff's run wall
time (`tpuoff run`'s own figure, best of 3), jax's (best of 5), and the time
per step. Timings only; nothing is asserted.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

WALL_RE = re.compile(r"wall time: ([0-9.]+) s")


def scan(xs, w):
    def step(c, x):
        c = jnp.tanh(c * 0.5 + x @ w)
        return c, c
    return lax.scan(step, jnp.zeros((xs.shape[1], w.shape[1]), xs.dtype), xs)[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tpuoff", required=True)
    ap.add_argument("--steps", default="100,200,400,800,1600")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tpuoff_scan_")
    print(f"{'T':>6} {'form':<8} {'tpuoff s':>10} {'per step us':>12} {'jax s':>10} {'per step us':>12}")
    for t in [int(s) for s in a.steps.split(",")]:
        rng = np.random.default_rng(t)
        xs = (rng.standard_normal((t, 16, 16)) * 0.5).astype(np.float32)
        w = (rng.standard_normal((16, 256)) * 0.2).astype(np.float32)
        lowered = jax.jit(scan).lower(xs, w)
        compiled = lowered.compile()
        jax.block_until_ready(compiled(xs, w))
        best = None
        for _ in range(5):
            t0 = time.perf_counter()
            jax.block_until_ready(compiled(xs, w))
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        for form, text in (("jax.hlo", lowered.as_text(dialect="hlo")), ("opt.hlo", compiled.as_text())):
            path = os.path.join(work, f"scan_{t}_{form}")
            with open(path, "w") as f:
                f.write(text)
            params = re.findall(r"^\s*%?(\S+) = \S+ parameter\((\d)\)", text.split("ENTRY", 1)[1], re.M)
            ind = os.path.join(work, f"in_{t}_{form}")
            os.makedirs(ind, exist_ok=True)
            for name, num in params:
                np.save(os.path.join(ind, f"{name}.npy"), (xs, w)[int(num)])
            times = []
            for _ in range(3):
                p = subprocess.run([a.tpuoff, "run", path, f"--inputs={ind}"], capture_output=True,
                                   text=True)
                if p.returncode != 0:
                    sys.exit(f"tpuoff run {path} failed: {p.stderr.strip()[-500:]}")
                times.append(float(WALL_RE.search(p.stdout).group(1)))
            tp = min(times)
            print(f"{t:>6} {form:<8} {tp:>10.4f} {tp / t * 1e6:>12.1f} {best:>10.4f} {best / t * 1e6:>12.1f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The same sharded GRPO step across processes: jax's multi-process CPU runtime vs tpuoff's MPI ranks.

  mpi_anchor.py --tpuoff BUILD/tools/tpuoff [--mpiexec mpiexec] [--processes 2]
                [--batch 8 --seq 256 --vocab 4096 --dtype bf16 --mesh 2x4 --seed 0]
                [--work DIR] [--json FILE]

Both sides compute grpo fwd_bwd (loss, per_token_loss, logp, entropy, lse, dlogits) of the
same global inputs (tools/xla_check/grpo_inputs.py) on a 2-D mesh, batch over the first
axis and vocab over the second, spread over P processes on this host:

  jax     P processes of this script (--worker), jax.distributed.initialize on localhost
          with gloo CPU collectives, N/P CPU devices each; the loss of jax_grpo.py jitted
          with NamedShardings (logits P(data, None, model), [B,T] arrays P(data)), so XLA's
          SPMD partitioner shards it; each process builds only its devices' shards; outputs
          gathered to process 0 (multihost_utils.process_allgather).
  tpuoff  mpirun -np P tpuoff run --kernel=grpo_tiled --mesh=AxB --shard=batch,vocab
          --inputs=DIR: each rank reads its devices' pieces of the .npy files by offset.

Prints per output the max |jax - tpuoff| against the kernel's tolerance
(grpo_inputs.tolerance) and the times side by side: each side's whole launch (processes
start to exit) and its step (jax: the jitted call after compiling, and the first call
with the compile; tpuoff: its reported wall time, devices planned and run plus the
gather to rank 0). Exit 1 when an output is beyond tolerance. Timings depend on the
machine's load: never asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

OUTPUTS = ["loss", "per_token_loss", "logp", "entropy", "lse", "dlogits"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mesh(text: str) -> tuple:
    a, b = (int(v) for v in text.lower().split("x"))
    return a, b


def expected_inputs(tpuoff: str, kernel_flags: list) -> list:
    """The parameter names tpuoff's kernel takes (from its 'expected parameters' list)."""
    r = subprocess.run([tpuoff, "run", *kernel_flags], capture_output=True, text=True)
    names = []
    for line in r.stderr.splitlines():
        line = line.strip()
        if line.endswith(")") and ".npy:" in line:
            names.append(line.split(".npy:")[0])
    if not names:
        raise SystemExit(f"could not read tpuoff's expected parameters: {r.stderr[:400]}")
    return names


def worker(args) -> int:
    """One jax process of the multi-process run."""
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{args.port}",
                               num_processes=args.processes, process_id=args.process_id)
    import jax.numpy as jnp  # noqa: F401
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import jax_grpo

    a, b = _mesh(args.mesh)
    devices = np.array(jax.devices()).reshape(a, b)
    mesh = Mesh(devices, ("data", "model"))
    gp = jax_grpo.GrpoParams(logits_dtype=args.dtype)
    names = args.inputs.split(",")
    gp_names = gp.input_names()
    if names != gp_names:
        raise SystemExit(f"tpuoff's parameters {names} differ from jax_grpo's {gp_names}")
    spec = {"logits": P("data", None, "model"), "advantages": P("data")}
    arrays, shardings = [], []
    for n in names:
        host = np.load(Path(args.work) / "inputs" / f"{n}.npy", mmap_mode="r")
        if n == "logits" and args.dtype == "bf16":
            import ml_dtypes
            dtype = ml_dtypes.bfloat16
        else:
            dtype = host.dtype
        ps = spec.get(n, P("data") if host.ndim == 2 else P())
        sh = NamedSharding(mesh, ps)
        # Only this process's devices' shards are read from the memory map.
        arr = jax.make_array_from_callback(
            host.shape, sh, lambda idx, h=host, t=dtype: np.asarray(h[idx]).astype(t))
        arrays.append(arr)
        shardings.append(sh)
    f = jax.jit(jax_grpo.make_value_and_grad(gp), in_shardings=tuple(shardings))
    t0 = time.perf_counter()
    out = jax.block_until_ready(f(*arrays))
    first = time.perf_counter() - t0
    steps = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(f(*arrays))
        steps.append(time.perf_counter() - t0)
    full = [np.asarray(multihost_utils.process_allgather(o, tiled=True)) for o in out]
    if jax.process_index() == 0:
        dst = Path(args.work) / "jax_outputs"
        dst.mkdir(parents=True, exist_ok=True)
        for n, v in zip(OUTPUTS, full):
            np.save(dst / f"{n}.npy", v.astype(np.float32))
        (Path(args.work) / "jax_times.json").write_text(json.dumps(
            {"first_call_s": first, "step_s": min(steps), "devices": len(jax.devices()),
             "processes": jax.process_count()}))
    jax.distributed.shutdown()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tpuoff")
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="bf16")
    ap.add_argument("--mesh", default="2x4")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default="/tmp/tpuoff_mpi_anchor")
    ap.add_argument("--json")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--process-id", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--inputs", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    if not args.tpuoff:
        ap.error("--tpuoff is required")
    import grpo_inputs

    a, b = _mesh(args.mesh)
    n_dev = a * b
    if n_dev % args.processes:
        ap.error(f"{args.processes} processes do not divide {n_dev} devices")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    kflags = ["--kernel=grpo_tiled", "--mode=fwd_bwd", f"--batch={args.batch}",
              f"--seq={args.seq}", f"--vocab={args.vocab}", f"--logits-dtype={args.dtype}",
              f"--mesh={args.mesh}", "--shard=batch,vocab"]
    names = expected_inputs(args.tpuoff, kflags)
    arrays = grpo_inputs.make_inputs("grpo_tiled", "fwd_bwd", args.batch, args.seq, args.vocab,
                                     args.dtype, args.seed)
    grpo_inputs.write_inputs(arrays, names, work / "inputs")
    del arrays

    # tpuoff across P MPI ranks.
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,vader")
    out_dir = work / "tpuoff_outputs"
    t0 = time.perf_counter()
    r = subprocess.run([args.mpiexec, "--oversubscribe", "-np", str(args.processes), args.tpuoff,
                        "run", *kflags, f"--inputs={work / 'inputs'}", f"--outputs={out_dir}",
                        "--overwrite"], capture_output=True, text=True, env=env)
    tpuoff_launch = time.perf_counter() - t0
    if r.returncode != 0:
        print(r.stdout, r.stderr, file=sys.stderr)
        return 1
    tpuoff_step = float(next(l.split()[2] for l in r.stdout.splitlines()
                             if l.startswith("wall time:")))

    # jax across P processes (gloo collectives on localhost).
    port = _free_port()
    jenv = dict(os.environ, JAX_PLATFORMS="cpu",
                XLA_FLAGS=f"--xla_force_host_platform_device_count={n_dev // args.processes}")
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", f"--port={port}",
                               f"--process-id={i}", f"--processes={args.processes}",
                               f"--mesh={args.mesh}", f"--dtype={args.dtype}",
                               f"--work={work}", f"--repeats={args.repeats}",
                               f"--inputs={','.join(names)}"], env=jenv)
             for i in range(args.processes)]
    codes = [p.wait(timeout=3600) for p in procs]
    jax_launch = time.perf_counter() - t0
    if any(codes):
        print(f"jax workers exited {codes}", file=sys.stderr)
        return 1
    jt = json.loads((work / "jax_times.json").read_text())

    atol, rtol = grpo_inputs.tolerance("grpo_tiled", args.dtype)
    rows, bad = [], []
    for n in OUTPUTS:
        j = np.load(work / "jax_outputs" / f"{n}.npy").astype(np.float64)
        t = np.load(out_dir / f"{n}.npy").astype(np.float64)
        if j.shape != t.shape:
            bad.append(f"{n}: jax {j.shape} vs tpuoff {t.shape}")
            continue
        d = np.abs(j - t)
        worst = float(d.max()) if d.size else 0.0
        over = int((d > atol + rtol * np.abs(j)).sum())
        rows.append({"output": n, "shape": list(t.shape), "max_abs_diff": worst, "beyond": over})
        if over:
            bad.append(f"{n}: {over} elements beyond atol {atol} + rtol {rtol}")
    report = {
        "shape": {"B": args.batch, "T": args.seq, "V": args.vocab, "dtype": args.dtype},
        "mesh": args.mesh, "processes": args.processes, "tolerance": [atol, rtol],
        "outputs": rows,
        "jax": {"launch_s": jax_launch, "first_call_s": jt["first_call_s"], "step_s": jt["step_s"]},
        "tpuoff": {"launch_s": tpuoff_launch, "step_s": tpuoff_step},
    }
    print(f"grpo_tiled fwd_bwd B={args.batch} T={args.seq} V={args.vocab} {args.dtype}, mesh "
          f"{args.mesh} batch,vocab, {args.processes} processes; tolerance atol {atol} rtol {rtol}")
    for row in rows:
        print(f"  {row['output']:<15} {str(row['shape']):<18} max|jax - tpuoff| "
              f"{row['max_abs_diff']:.3e}  {'ok' if row['beyond'] == 0 else 'MISMATCH'}")
    print(f"  jax (gloo, {args.processes} processes): launch {jax_launch:.2f} s, first call "
          f"(compile + run) {jt['first_call_s']:.3f} s, step {jt['step_s']:.3f} s")
    print(f"  tpuoff (MPI, {args.processes} ranks):  launch {tpuoff_launch:.2f} s, step "
          f"{tpuoff_step:.3f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    for line in bad:
        print("FAIL: " + line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

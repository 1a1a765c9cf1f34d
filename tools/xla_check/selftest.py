#!/usr/bin/env python3
"""Self-test of the Python side of the XLA conformance harness (no C++ needed).

  selftest.py [--work DIR] [--testdata ../../tests/testdata/grpo]

1. jax_grpo: the JAX GRPO implementation reproduces every testdata case; dump HLO.
2. xla_run on each pre- and post-optimisation dump (text path): matches JAX's outputs
   and the case's expected values at the case tolerance.
3. proto path: the dump re-serialized by XLA as HloModuleProto runs identically.
4. SPMD path: hand-written per-device modules (2 and 4 partitions) split global
   inputs by sharding, run on N CPU devices, reassemble, match numpy; recorded global
   shapes of a ragged vocab split crop the outputs; JAX's own shard_map HLO (Shardy and
   GSPMD global forms) runs through XLA's partitioner; the conformance comparison fails
   on one element beyond tolerance.
5. CLI smoke test (subprocesses) of `run`, `compare` (pass and fail exit codes).
Ends with 'N passed, N failed'.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import xla_run  # noqa: E402

RESULTS: list = []


def record(name: str, ok: bool, detail: str = "") -> None:
    RESULTS.append((name, ok))
    detail = " ".join(detail.split())
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f" -- {detail}" if detail else ""), flush=True)


def guarded(name):
    def deco(fn):
        def wrap(*a, **k):
            try:
                return fn(*a, **k)
            except Exception as e:  # a crash is a failure, keep going
                traceback.print_exc()
                record(name, False, f"{type(e).__name__}: {e}")
        return wrap
    return deco


def cmp_dir(got: Path, ref: Path, atol: float, rtol: float, prefix: str = "") -> tuple:
    import io
    buf = io.StringIO()
    ok = xla_run.compare_dirs(str(got), str(ref), atol, rtol, prefix, out=buf)
    return ok, buf.getvalue().strip().replace("\n", "; ")


def xla_recompiles(case_dir: Path) -> bool:
    """XLA:CPU (jaxlib 0.10.2) aborts compiling its own optimised HLO of the GRPO math when
    T=1 (computation_partitioner.cc:269 "Check failed: operand_maps.size() == 1"), which
    this self-test does for every case.  Those cases are left to xla_conformance_testdata
    (tpuoff's HLO on XLA) and xla_conformance_reverse (JAX's HLO, pre- and post-
    optimisation, on tpuoff), which run them."""
    return json.loads((case_dir / "case.json").read_text())["shape"]["T"] > 1


def grpo_checks(testdata: Path, work: Path) -> None:
    import jax_grpo
    every = sorted(p.parent for p in testdata.glob("*/case.json"))
    cases = [c for c in every if xla_recompiles(c)]
    for c in every:
        if c not in cases:
            print(f"not in the self-test: {c.name} (T=1: XLA aborts recompiling its optimised HLO; "
                  f"covered by xla_conformance_testdata/reverse)")
    if not cases:
        record("grpo testdata present", False, f"no cases under {testdata}")
        return
    pre_ops, post_ops = set(), set()
    for cd in cases:
        name = cd.name
        out = work / name

        @guarded(f"jax_grpo {name}")
        def one():
            ok = jax_grpo.check_case(cd, out=open("/dev/null", "w"))
            record(f"jax_grpo vs expected: {name}", ok)
            jax_grpo.dump_case(cd, out / "pre_opt.hlo", out / "post_opt.hlo", out / "inputs", out / "jax_outputs")
            case = json.loads((cd / "case.json").read_text())
            tol = case["tolerance"]
            pre_ops.update(jax_grpo.opcode_set(out / "pre_opt.hlo"))
            post_ops.update(jax_grpo.opcode_set(out / "post_opt.hlo"))
            for v in ("pre_opt", "post_opt", "post_opt.nometa"):
                od = out / f"xla_{v}"
                xla_run.run_module(out / f"{v}.hlo", out / "inputs", od, "text", 1)
                ok1, d1 = cmp_dir(od, out / "jax_outputs", tol["atol"], tol["rtol"])
                ok2, d2 = cmp_dir(od, cd, tol["atol"], tol["rtol"], "expected_")
                exact, _ = cmp_dir(od, out / "jax_outputs", 0.0, 0.0)
                record(f"xla_run {v} text {name}", ok1 and ok2,
                       ("bit-exact vs JAX" if exact else "within tol vs JAX") if ok1 and ok2 else d1 + " | " + d2)
            for k in ("memory.json", "xla_text.hlo", "xla_compiled.hlo"):
                if not (out / "xla_pre_opt" / k).exists():
                    record(f"xla_run wrote {k} ({name})", False)
            if name == cases[0].name:
                # proto path: XLA's own serialization of the parsed module
                mod, _ = xla_run.load_module(out / "pre_opt.hlo", "text")
                pb = out / "pre_opt.pb"
                pb.write_bytes(mod.as_serialized_hlo_module_proto())
                for fmt in ("proto", "auto"):
                    od = out / f"xla_pre_opt_pb_{fmt}"
                    s = xla_run.run_module(pb, out / "inputs", od, fmt, 1)
                    ok, d = cmp_dir(od, out / "xla_pre_opt", 0.0, 0.0)
                    record(f"xla_run proto ({fmt}) {name}", ok and s["format"] == "proto", d if not ok else "")
        one()
    (work / "opcodes.json").write_text(json.dumps({"pre_opt": sorted(pre_ops), "post_opt": sorted(post_ops)},
                                                  indent=1) + "\n")
    print("pre-optimisation opcodes: " + " ".join(sorted(pre_ops)))
    print("post-optimisation opcodes: " + " ".join(sorted(post_ops)))


def spmd_checks(work: Path) -> None:
    rng = np.random.default_rng(0)

    @guarded("spmd 2p allreduce")
    def two():
        d = work / "spmd2"
        (d / "in").mkdir(parents=True, exist_ok=True)
        P = rng.standard_normal((8, 8)).astype(np.float32)
        W = rng.standard_normal(8).astype(np.float32)
        np.save(d / "in" / "p.npy", P)
        np.save(d / "in" / "w.npy", W)
        ar = (P[:4] * W) + (P[4:] * W)
        exp = {"y": np.concatenate([ar + P[:4], ar + P[4:]]), "total": np.float32(ar.sum())}
        (d / "ref").mkdir(exist_ok=True)
        for k, v in exp.items():
            np.save(d / "ref" / f"{k}.npy", v)
        for fmt in ("text", "proto"):
            src = HERE / "testdata" / "spmd_allreduce_2p.hlo"
            if fmt == "proto":
                mod, _ = xla_run.load_module(src, "text")
                src = d / "m.pb"
                src.write_bytes(mod.as_serialized_hlo_module_proto())
            s = xla_run.run_module(src, d / "in", d / f"out_{fmt}", "auto", 2)
            ok, det = cmp_dir(d / f"out_{fmt}", d / "ref", 1e-5, 1e-5)
            record(f"spmd 2 partitions all-reduce ({fmt})", ok and not s["warnings"], det + str(s["warnings"]))

    @guarded("spmd 4p vocab lse")
    def four():
        d = work / "spmd4"
        (d / "in").mkdir(parents=True, exist_ok=True)
        Z = (3 * rng.standard_normal((2, 3, 16))).astype(np.float32)
        Y = rng.integers(0, 16, (2, 3)).astype(np.int32)
        np.save(d / "in" / "logits.npy", Z)
        np.save(d / "in" / "chosen_ids.npy", Y)
        z = Z.astype(np.float64)
        mx = z.max(-1, keepdims=True)
        lse = (np.log(np.exp(z - mx).sum(-1, keepdims=True)) + mx)
        (d / "ref").mkdir(exist_ok=True)
        np.save(d / "ref" / "lse.npy", lse[..., 0].astype(np.float32))
        np.save(d / "ref" / "chosen_logit.npy", np.take_along_axis(Z, Y[..., None], -1)[..., 0])
        np.save(d / "ref" / "softmax.npy", np.exp(z - lse).astype(np.float32))
        s = xla_run.run_module(HERE / "testdata" / "spmd_vocab_lse_4p.hlo", d / "in", d / "out", "auto", None)
        ok, det = cmp_dir(d / "out", d / "ref", 1e-6, 1e-5)
        record("spmd 4 partitions vocab-sharded lse (num_partitions from module)",
               ok and s["num_partitions"] == 4 and not s["warnings"], det + str(s["warnings"]))

    @guarded("shard split/assemble round trip")
    def roundtrip():
        ok = True
        for sh, shape, n in [("{devices=[2,1]<=[2]}", (8, 6), 2), ("{devices=[1,2,2]<=[2,2]T(1,0)}", (2, 6, 4), 4),
                             ("{devices=[2,1,2]<=[4] last_tile_dim_replicate}", (4, 3), 4),
                             ("{devices=[1,4]3,1,2,0}", (3, 8), 4), ("{replicated}", (5,), 3)]:
            spec = xla_run.shard_spec(sh, len(shape), n)
            local = tuple(g // t for g, t in zip(shape, spec.tile_dims)) if spec.kind == "tiled" else shape
            a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
            parts = xla_run.split_global(a, local, spec, n, sh)
            w: list = []
            b = xla_run.assemble_global(parts, spec, n, sh, w)
            ok &= np.array_equal(a, b) and not w
        # explicit device order: device 3 holds tile 0 of {devices=[1,4]3,1,2,0}
        spec = xla_run.shard_spec("{devices=[1,4]3,1,2,0}", 2, 4)
        parts = xla_run.split_global(np.arange(8.0).reshape(1, 8), (1, 2), spec, 4, "x")
        ok &= parts[3].tolist() == [[0.0, 1.0]] and parts[0].tolist() == [[6.0, 7.0]]
        # ragged global dim: 7 columns over 2 tiles of 4 -> the last shard is zero-padded
        spec = xla_run.shard_spec("{devices=[1,2]<=[2]}", 2, 2)
        parts = xla_run.split_global(np.ones((3, 7), np.float32), (3, 4), spec, 2, "ragged")
        ok &= parts[1][:, 3].tolist() == [0.0] * 3 and parts[1][:, :3].sum() == 9.0
        record("shard split/assemble round trip", bool(ok))

    @guarded("spmd 2p while/dynamic-slice/all-gather")
    def loop():
        d = work / "spmd2w"
        (d / "in").mkdir(parents=True, exist_ok=True)
        X = rng.standard_normal((2, 16)).astype(np.float32)
        np.save(d / "in" / "x.npy", X)
        (d / "ref").mkdir(exist_ok=True)
        np.save(d / "ref" / "rowsum.npy", X.sum(1))
        np.save(d / "ref" / "gathered.npy", X)
        s = xla_run.run_module(HERE / "testdata" / "spmd_while_allgather_2p.hlo", d / "in", d / "out", "auto", None)
        ok, det = cmp_dir(d / "out", d / "ref", 1e-5, 1e-5)
        record("spmd 2 partitions while/dynamic-slice/all-gather", ok and not s["warnings"], det + str(s["warnings"]))

    @guarded("spmd 4p ragged vocab: recorded global shapes")
    def ragged():
        # tpuoff's ShardMap records the unpadded global shapes of a per-device module
        # (V=14 over 4 shards of 4): inputs are checked against them, outputs cropped.
        d = work / "spmd4r"
        (d / "in").mkdir(parents=True, exist_ok=True)
        text = (HERE / "testdata" / "spmd_vocab_lse_4p.hlo").read_text().replace(
            'frontend_attributes={output_names="lse,chosen_logit,softmax"}',
            'frontend_attributes={global_output_shapes="f32[2,3];f32[2,3];f32[2,3,14]",'
            'global_parameter_shapes="f32[2,3,14];s32[2,3]",output_names="lse,chosen_logit,softmax"}', 1)
        (d / "m.hlo").write_text(text)
        Z = (3 * rng.standard_normal((2, 3, 14))).astype(np.float32)
        Y = rng.integers(0, 14, (2, 3)).astype(np.int32)
        np.save(d / "in" / "logits.npy", Z)
        np.save(d / "in" / "chosen_ids.npy", Y)
        zp = np.concatenate([Z, np.zeros((2, 3, 2), np.float32)], -1).astype(np.float64)  # XLA-style padding
        mx = zp.max(-1, keepdims=True)
        lse = np.log(np.exp(zp - mx).sum(-1, keepdims=True)) + mx
        (d / "ref").mkdir(exist_ok=True)
        np.save(d / "ref" / "lse.npy", lse[..., 0].astype(np.float32))
        np.save(d / "ref" / "chosen_logit.npy", np.take_along_axis(Z, Y[..., None], -1)[..., 0])
        np.save(d / "ref" / "softmax.npy", np.exp(zp - lse)[..., :14].astype(np.float32))
        s = xla_run.run_module(d / "m.hlo", d / "in", d / "out", "auto", None)
        ok, det = cmp_dir(d / "out", d / "ref", 1e-6, 1e-5)
        record("spmd 4p ragged vocab: outputs cropped to the recorded global shape",
               ok and s["outputs"]["softmax"]["shape"] == [2, 3, 14], det)
        np.save(d / "in" / "logits.npy", np.zeros((2, 3, 16), np.float32))
        try:
            xla_run.run_module(d / "m.hlo", d / "in", d / "out2", "auto", None)
            record("spmd 4p ragged vocab: input not of the recorded global shape -> error", False)
        except xla_run.HarnessError as e:
            record("spmd 4p ragged vocab: input not of the recorded global shape -> error",
                   "global shape" in str(e), str(e)[-200:])

    @guarded("jax shard_map global form")
    def shard_map():
        # What JAX itself emits for a shard_map (Shardy: xla.sdy.GlobalToLocalShape;
        # GSPMD: Sharding/SPMDFullToShardShape custom-calls) runs as a global program.
        import jax
        import jax.numpy as jnp
        from jax.sharding import Mesh, PartitionSpec as P
        mesh = Mesh(np.array(jax.devices()[:4]), ("x",))

        def body(z, m):
            return jnp.sum(z, axis=-1), jax.lax.psum(jnp.sum(m), "x")

        z = rng.standard_normal((8, 3, 10)).astype(np.float32)
        m = rng.standard_normal((8, 3)).astype(np.float32)
        was = jax.config.jax_use_shardy_partitioner
        for shardy in (True, False):
            jax.config.update("jax_use_shardy_partitioner", shardy)
            try:
                f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x"), P("x")), out_specs=(P("x"), P())))
                text = f.lower(z, m).as_text(dialect="hlo")
            finally:
                jax.config.update("jax_use_shardy_partitioner", was)
            d = work / f"shard_map_{'sdy' if shardy else 'gspmd'}"
            (d / "in").mkdir(parents=True, exist_ok=True)
            (d / "m.hlo").write_text(text)
            info = xla_run.module_info(xla_run.load_module(d / "m.hlo", "text")[0])
            for p, a in zip(info.params, (z, m)):
                np.save(d / "in" / f"{p.name}.npy", a)
            s = xla_run.run_module(d / "m.hlo", d / "in", d / "out", "text", 4)
            got0, got1 = np.load(d / "out" / "output_0.npy"), np.load(d / "out" / "output_1.npy")
            ok = (s["global_form"] and np.allclose(got0, z.sum(-1), atol=1e-5)
                  and np.allclose(got1, m.sum(), atol=1e-4) and not s["warnings"])
            record(f"jax shard_map HLO ({'Shardy' if shardy else 'GSPMD'} form) on 4 partitions", bool(ok),
                   f"{s['warnings']}")

    @guarded("conformance compare negative control")
    def negative():
        import conformance
        d = work / "negctl"
        for sub in ("a", "b"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        x = rng.standard_normal((4, 5)).astype(np.float32)
        np.save(d / "a" / "x.npy", x)
        np.save(d / "b" / "x.npy", x + np.float32(2e-4) * (np.arange(20).reshape(4, 5) == 7))
        c = conformance.Case("negctl", {})
        same = c.compare("same", d / "a", d / "a", 1e-5, 1e-4)
        off = c.compare("one element off", d / "b", d / "a", 1e-5, 1e-4)
        record("conformance compare: identical passes, one element beyond tolerance fails",
               same and not off and not c.ok and "1/20 beyond" in c.checks[1]["detail"], c.checks[1]["detail"])

    two()
    four()
    loop()
    roundtrip()
    ragged()
    shard_map()
    negative()


def cli_checks(work: Path, any_case: Path) -> None:
    py = sys.executable
    x = str(HERE / "xla_run.py")

    @guarded("cli")
    def go():
        t0 = time.time()
        r = subprocess.run([py, x, "run", str(HERE / "testdata" / "spmd_allreduce_2p.hlo"), "--inputs",
                            str(work / "spmd2" / "in"), "--outputs", str(work / "cli_out"), "--num-partitions", "2"],
                           capture_output=True, text=True)
        record("cli run (2 partitions, subprocess)", r.returncode == 0, r.stderr[-500:] if r.returncode else
               f"{time.time() - t0:.1f}s")
        r = subprocess.run([py, x, "compare", str(work / "cli_out"), str(work / "spmd2" / "ref"), "--atol", "1e-5"],
                           capture_output=True, text=True)
        record("cli compare pass -> exit 0", r.returncode == 0, r.stdout[-300:])
        bad = work / "cli_bad"
        bad.mkdir(exist_ok=True)
        for f in (work / "cli_out").glob("*.npy"):
            np.save(bad / f.name, np.load(f) + 1.0)
        r = subprocess.run([py, x, "compare", str(bad), str(work / "spmd2" / "ref")], capture_output=True, text=True)
        record("cli compare beyond tolerance -> exit 1", r.returncode == 1, r.stdout[-300:])
        r = subprocess.run([py, x, "run", str(HERE / "testdata" / "spmd_allreduce_2p.hlo"), "--inputs",
                            str(work / "nonexistent"), "--outputs", str(work / "cli_out2")],
                           capture_output=True, text=True)
        record("cli run with missing inputs -> loud error", r.returncode != 0 and "no input" in r.stderr,
               r.stderr[-200:])
    go()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=None)
    ap.add_argument("--testdata", default=str(HERE.parents[1] / "tests" / "testdata" / "grpo"))
    a = ap.parse_args()
    xla_run.ensure_cpu_devices(4)
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="xla_check_"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work dir: {work}")
    td = Path(a.testdata)
    t0 = time.time()
    grpo_checks(td, work)
    spmd_checks(work)
    cli_checks(work, td)
    npass = sum(1 for _, ok in RESULTS if ok)
    nfail = len(RESULTS) - npass
    print(f"selftest took {time.time() - t0:.1f}s")
    print(f"{npass} passed, {nfail} failed")
    return 0 if nfail == 0 and npass > 0 else 1


if __name__ == "__main__":
    sys.exit(main())

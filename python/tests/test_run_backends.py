"""tpuoff.run on both backends, through the CLI's code path (RunOnBackend):
every test vector's fwd_bwd module on the XLA CPU PJRT plugin against the host
emulator and the vector, unsharded and as partitioned 2-D modules; the run
limits (loop iterations, time) and the host-memory refusal of `tpuoff run`."""
import ml_dtypes
import numpy as np
import pytest

import tpuoff
import vectors

KINDS = ("grpo", "grpo_v2", "grpo_fused", "grpo_fused_v2")
CASES = vectors.cases(*KINDS)
PJRT = tpuoff.pjrt_info()


def test_this_build_has_the_pjrt_backend():
    # tools/scripts/python_tests.sh builds the package against the pinned
    # plugins of tools/pjrt/setup_plugins.sh, as run_tests.sh builds the CLI.
    assert PJRT["available"], PJRT
    assert PJRT["cpu_plugin"].endswith("xla_cpu_pjrt.so"), PJRT


def case_module(case, mesh=None, shard=None):
    """The case's fwd_bwd module (the flags of tests/cli/run_test_vectors.sh)."""
    s = case.shape
    flags = dict(mode="fwd_bwd", batch=s["B"], seq=s["T"], vocab=s["V"],
                 logits_dtype=case.dtype, on_policy="old_logp" not in case.inputs,
                 token_count_input="total_valid_tokens" in case.inputs,
                 row_count_input="total_nonempty_rows" in case.inputs, mesh=mesh, shard=shard)
    flags.update({k: v for k, v in case.options.items() if v is not None})
    if "H" in s:
        return tpuoff.kernel_hlo("grpo_fused_linear", hidden=s["H"], token_chunk=7,
                                 block_size=64, **flags)
    return tpuoff.kernel_hlo("grpo_tiled", block_size=16, **flags)


def case_inputs(case, module):
    sig = tpuoff.signature(module)
    out = {}
    for p in sig["parameters"]:
        name = p["name"]
        x = np.ascontiguousarray(case.inputs[name])
        if p["global_shape"] == ():
            x = x.reshape(())  # case.json keeps counts as [n]
        if case.dtype == "bf16" and name in ("logits", "hidden", "lm_head"):
            x = x.astype(ml_dtypes.bfloat16)
        out[name] = x
    return out


def f32(x):
    return np.asarray(x, np.float32)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_vector_on_pjrt_and_emulator(case):
    # Unsharded, and for the v2 vectors partitioned over a 2x4 mesh
    # (batch,vocab; the fused kernel seq,vocab): global arrays in and out on
    # both backends. (The CLI's pjrt_test_vectors runs the v1 ones sharded.)
    runs = [(None, None)]
    if case.path.parent.name.endswith("_v2"):
        runs.append(("2x4", "seq,vocab") if "H" in case.shape else ("2x4", "batch,vocab"))
    for mesh, shard in runs:
        module = tpuoff.load(case_module(case, mesh, shard))
        inputs = case_inputs(case, module)
        emu = tpuoff.run(module, inputs)
        xla, stats = tpuoff.run(module, inputs, backend="pjrt", return_stats=True)
        what = f"{case.id} {shard or 'unsharded'}"
        assert stats["backend"] == "pjrt" and stats["devices"] == []
        assert stats["summary"].startswith(f"pjrt: {PJRT['cpu_plugin']}"), stats["summary"]
        assert f"{8 if mesh else 1} device" in stats["summary"]
        assert list(xla) == list(emu)
        for name, want in case.expected.items():
            for backend, got in (("pjrt", xla), ("emulator", emu)):
                vectors.assert_close(f32(got[name]), want, case.atol, case.rtol,
                                     f"{what} {backend} {name}")
        for name in emu:
            assert xla[name].dtype == emu[name].dtype and xla[name].shape == emu[name].shape
            # Same program, two compilers: f32 rounding apart; bf16 outputs
            # one bf16 rounding apart.
            bf16 = emu[name].dtype == ml_dtypes.bfloat16
            vectors.assert_close(f32(xla[name]), f32(emu[name]), 1e-5, 8e-3 if bf16 else 1e-4,
                                 f"{what} {name} pjrt vs emulator")


SMALL = dict(batch=2, seq=4, vocab=100, block_size=16)


def small_inputs(b=2, t=4, v=100):
    rng = np.random.default_rng(1)
    return {"logits": rng.standard_normal((b, t, v)).astype(np.float32),
            "chosen_ids": rng.integers(0, v, (b, t)).astype(np.int32),
            "completion_mask": np.ones((b, t), np.float32),
            "advantages": rng.standard_normal(b).astype(np.float32),
            "old_logp": np.full((b, t), -4.0, np.float32)}


def test_pjrt_options():
    text = tpuoff.kernel_hlo("grpo_tiled", mode="fwd", **SMALL)
    inputs = small_inputs()
    # The emulator's options are refused on PJRT, as the CLI refuses its flags.
    # (timeout applies to both: the plugin's process is killed then.)
    for key, value in (("threads", 1), ("hbm_gib", 1.0), ("max_loop_iterations", 5),
                       ("collective_timeout", 5.0)):
        with pytest.raises(ValueError, match=f"{key} applies to the emulator"):
            tpuoff.run(text, inputs, backend="pjrt", **{key: value})
    with pytest.raises(ValueError, match="pjrt_plugin needs backend='pjrt'"):
        tpuoff.run(text, inputs, pjrt_plugin=PJRT["cpu_plugin"])
    # An explicit plugin path is the default one's run.
    a = tpuoff.run(text, inputs, backend="pjrt")
    b = tpuoff.run(text, inputs, backend="pjrt", pjrt_plugin=PJRT["cpu_plugin"])
    assert all(np.array_equal(a[k], b[k]) for k in a)
    with pytest.raises(FileNotFoundError, match="/no/such/plugin.so") as e:
        tpuoff.run(text, inputs, backend="pjrt", pjrt_plugin="/no/such/plugin.so")
    assert isinstance(e.value, tpuoff.NotFoundError)
    # Bad inputs are refused before the plugin sees them, as on the emulator.
    with pytest.raises(ValueError, match="missing input 'old_logp'"):
        tpuoff.run(text, {k: v for k, v in inputs.items() if k != "old_logp"}, backend="pjrt")


def test_run_limits():
    # grpo_tiled walks V = 100 in tiles of 16: a loop of 7 iterations.
    text = tpuoff.kernel_hlo("grpo_tiled", mode="fwd", **SMALL)
    inputs = small_inputs()
    with pytest.raises(MemoryError, match=r"while loop %\S+ .*did not finish within the limit "
                                          "of 3 iterations") as e:
        tpuoff.run(text, inputs, max_loop_iterations=3)
    assert isinstance(e.value, tpuoff.ResourceExhaustedError)
    ok = tpuoff.run(text, inputs, max_loop_iterations=7)
    assert np.isfinite(ok["loss"])
    with pytest.raises(TimeoutError, match="device 0: exceeded the time limit of 1e-09 s") as e:
        tpuoff.run(text, inputs, timeout=1e-9)
    assert isinstance(e.value, tpuoff.DeadlineExceededError)
    for key, value, message in (("max_loop_iterations", -1, "max_loop_iterations must be >= 0"),
                                ("timeout", -1.0, "timeout must be in"),
                                ("collective_timeout", 0.0, "collective_timeout must be in")):
        with pytest.raises(ValueError, match=message):
            tpuoff.run(text, inputs, **{key: value})


def test_run_refuses_what_the_host_cannot_hold():
    # A scalar broadcast to 120 GB: refused before anything is allocated, with
    # `tpuoff run`'s message, on both backends.
    text = """HloModule huge
ENTRY %main (p: f32[]) -> f32[150000,200000] {
  %p = f32[] parameter(0)
  ROOT %b = f32[150000,200000] broadcast(%p), dimensions={}
}
"""
    for backend in ("emulator", "pjrt"):
        with pytest.raises(MemoryError, match="not enough host memory: tpuoff.run of huge needs "
                                              "about") as e:
            tpuoff.run(text, {"p": np.float32(1)}, backend=backend)
        assert isinstance(e.value, tpuoff.ResourceExhaustedError)

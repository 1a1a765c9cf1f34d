"""tpuoff core API: kernel_hlo, load/signature, run, memory, errors."""
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tpuoff
import vectors

SMALL = dict(batch=2, seq=4, vocab=100, block_size=32)
# `pip install .` installs the tpuoff CLI beside the interpreter.
CLI = str(Path(sys.executable).parent / "tpuoff")


def small_inputs(seed=0, b=2, t=4, v=100, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return {
        "logits": (3 * rng.standard_normal((b, t, v))).astype(dtype),
        "chosen_ids": rng.integers(0, v, (b, t)).astype(np.int32),
        "completion_mask": (rng.random((b, t)) < 0.8).astype(np.float32),
        "advantages": rng.standard_normal(b).astype(np.float32),
        "old_logp": (rng.standard_normal((b, t)) - 4).astype(np.float32),
    }


def numpy_forward(inputs):
    z = inputs["logits"].astype(np.float64)
    lse = np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1)) + z.max(-1)
    logp = np.take_along_axis(z, inputs["chosen_ids"][..., None].astype(np.int64), -1)[..., 0] - lse
    return lse, logp


# --- kernel_hlo ---------------------------------------------------------------------------

def test_kernel_hlo_text_matches_the_cli():
    text = tpuoff.kernel_hlo("grpo_tiled", mode="fwd_bwd", logits_dtype="bf16", eps_high=0.28,
                             delta=1.5, **SMALL)
    assert text.startswith("HloModule grpo_tiled_fwd_bwd")
    dumped = subprocess.run([CLI, "dump", "--kernel=grpo_tiled", "--mode=fwd_bwd",
                             "--logits-dtype=bf16", "--eps-high=0.28", "--delta=1.5",
                             "--batch=2", "--seq=4", "--vocab=100", "--block-size=32"],
                            check=True, capture_output=True, text=True).stdout
    assert text == dumped


def test_kernel_hlo_formats_round_trip():
    proto = tpuoff.kernel_hlo("grpo_tiled", format="proto", mode="fwd", **SMALL)
    text = tpuoff.kernel_hlo("grpo_tiled", format="text", mode="fwd", **SMALL)
    js = tpuoff.kernel_hlo("grpo_tiled", format="json", mode="fwd", **SMALL)
    assert isinstance(proto, bytes) and isinstance(text, str) and json.loads(js)
    for form in (proto, text, js):
        assert tpuoff.load(form).text() == text
    assert tpuoff.load(text).proto() == proto


def test_kernel_hlo_every_cli_flag_is_a_keyword():
    names = tpuoff.kernel_option_names()
    for n in ("kernel", "mode", "batch", "seq", "vocab", "logits_dtype", "eps_low", "eps_high",
              "temperature", "temperature_mode", "beta", "delta", "loss_type", "max_len",
              "token_count_input", "on_policy", "block_size", "hidden", "token_chunk",
              "dlogits_dtype", "mesh",
              "shard"):
        assert n in names
    help_text = subprocess.run([CLI, "dump", "--help"], check=True,
                               capture_output=True, text=True).stdout
    for n in names:
        assert f"--{n.replace('_', '-')}" in help_text


def test_kernel_hlo_options_change_the_module():
    base = tpuoff.signature(tpuoff.kernel_hlo("grpo_tiled", mode="fwd", **SMALL))
    params = [p["name"] for p in base["parameters"]]
    assert params == ["logits", "chosen_ids", "completion_mask", "advantages", "old_logp"]
    sig = tpuoff.signature(tpuoff.kernel_hlo("grpo_tiled", mode="bwd", beta=0.1, on_policy=True,
                                             token_count_input=True, **SMALL))
    assert [p["name"] for p in sig["parameters"]] == [
        "logits", "chosen_ids", "completion_mask", "advantages", "ref_logp",
        "total_valid_tokens", "lse", "logp"]
    assert [o["name"] for o in sig["outputs"]] == ["dlogits"]


def test_kernel_hlo_sharded_signature():
    sig = tpuoff.signature(tpuoff.kernel_hlo("grpo_tiled", mode="fwd_bwd", mesh=4, shard="vocab",
                                             **SMALL))
    assert sig["partitioned"] and sig["num_partitions"] == 4
    logits = sig["parameters"][0]
    assert logits["shape"] == (2, 4, 25) and logits["global_shape"] == (2, 4, 100)
    dlogits = sig["outputs"][-1]
    assert dlogits["name"] == "dlogits" and dlogits["global_shape"] == (2, 4, 100)


@pytest.mark.parametrize("mesh,shard", [((2, 4), ("batch", "vocab")), ("2x4", "seq,vocab"),
                                        ((2, 2, 2), "batch,seq,vocab")])
def test_kernel_hlo_2d_meshes(mesh, shard):
    # The CLI's --mesh=AxB --shard=KIND,KIND forms, as strings or tuples: the
    # same module as `tpuoff dump`, global arrays in and out, equal to the
    # unsharded run.
    flags = dict(mode="fwd_bwd", batch=4, seq=6, vocab=100, block_size=16)
    text = tpuoff.kernel_hlo("grpo_tiled", mesh=mesh, shard=shard, **flags)
    as_cli = lambda v, sep: v if isinstance(v, str) else sep.join(map(str, v))
    dumped = subprocess.run([CLI, "dump", "--kernel=grpo_tiled", f"--mesh={as_cli(mesh, 'x')}",
                             f"--shard={as_cli(shard, ',')}",
                             *[f"--{k.replace('_', '-')}={v}" for k, v in flags.items()]],
                            check=True, capture_output=True, text=True).stdout
    assert text == dumped
    sig = tpuoff.signature(text)
    assert sig["partitioned"] and sig["num_partitions"] == 8
    kinds = as_cli(shard, ",").split(",")
    sizes = [int(n) for n in as_cli(mesh, "x").split("x")]
    split = {k: int(np.prod([n for n, kk in zip(sizes, kinds) if kk == k])) for k in kinds}
    logits = sig["parameters"][0]
    assert logits["global_shape"] == (4, 6, 100)
    assert logits["shape"] == (4 // split.get("batch", 1), 6 // split.get("seq", 1),
                               -(-100 // split["vocab"]))
    inputs = small_inputs(b=4, t=6, v=100)
    whole = tpuoff.run(tpuoff.kernel_hlo("grpo_tiled", **flags), inputs)
    sharded = tpuoff.run(text, inputs)
    for name in whole:
        vectors.assert_close(sharded[name], whole[name], 1e-6, 1e-5, f"{shard} {name}")


@pytest.mark.parametrize("kwargs,message", [
    (dict(kernel="grpo_tiled", batch=0), "--batch must be >= 1, got 0"),
    (dict(kernel="grpo_tiled", mode="sideways"), "--mode expects one of fwd|bwd|fwd_bwd"),
    (dict(kernel="grpo_reference", mesh=8, shard="vocab"), "vocab sharding needs a tiled kernel"),
    (dict(kernel="grpo_tiled", mesh=4, shard="sideways"),
     "--shard expects one of none|batch|seq|vocab per mesh axis"),
    (dict(kernel="grpo_tiled", mesh=(2, 4), shard=("batch", "vocab", "seq")),
     "--shard"),
    (dict(kernel="grpo_tiled", hidden=8), "--hidden only applies with --kernel=grpo_fused_linear"),
    (dict(kernel="entropy_tiled", mode="bwd"), "has only --mode=fwd"),
    (dict(kernel="grpo_tiled", eps_low="wide"), "--eps-low expects"),
    (dict(batch=2), "expected kernel=NAME"),
])
def test_kernel_hlo_errors_are_the_cli_messages(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("|", r"\|")) as e:
        tpuoff.kernel_hlo(**kwargs)
    assert isinstance(e.value, tpuoff.InvalidArgumentError)


def test_kernel_hlo_unknown_keyword():
    with pytest.raises(TypeError, match="unexpected keyword argument 'eps_lo'"):
        tpuoff.kernel_hlo("grpo_tiled", eps_lo=0.1)
    with pytest.raises(TypeError, match="must be a number, bool or str"):
        tpuoff.kernel_hlo("grpo_tiled", batch=[2])
    with pytest.raises(ValueError, match="format must be"):
        tpuoff.kernel_hlo("grpo_tiled", format="pdf")


# --- load / run ---------------------------------------------------------------------------

def test_run_matches_numpy_and_outputs_are_handed_over():
    inputs = small_inputs()
    out, stats = tpuoff.run(tpuoff.kernel_hlo("grpo_tiled", mode="fwd", **SMALL), inputs,
                            return_stats=True)
    assert list(out) == ["loss", "per_token_loss", "logp", "entropy", "lse"]
    lse, logp = numpy_forward(inputs)
    vectors.assert_close(out["lse"], lse, 1e-5, 1e-5, "lse")
    vectors.assert_close(out["logp"], logp, 1e-5, 1e-5, "logp")
    for a in out.values():
        # The emulator's buffer, owned by the array's base object, not a copy.
        assert not a.flags.owndata and a.base is not None and a.flags.c_contiguous
    assert stats["devices"][0]["peak_hbm_bytes"] > inputs["logits"].nbytes
    assert stats["wall_seconds"] > 0


def test_run_bf16_inputs_and_outputs():
    inputs = small_inputs(dtype=ml_dtypes.bfloat16)
    out = tpuoff.run(tpuoff.kernel_hlo("grpo_tiled", mode="fwd_bwd", logits_dtype="bf16", **SMALL),
                     inputs)
    assert out["dlogits"].dtype == ml_dtypes.bfloat16 and out["dlogits"].shape == (2, 4, 100)
    lse, _ = numpy_forward({**inputs, "logits": inputs["logits"].astype(np.float32)})
    vectors.assert_close(out["lse"], lse, 1e-5, 1e-5, "lse")
    # Raw bf16 bits in a uint16 array are the same input.
    raw = tpuoff.run(tpuoff.kernel_hlo("grpo_tiled", mode="fwd_bwd", logits_dtype="bf16", **SMALL),
                     {**inputs, "logits": inputs["logits"].view(np.uint16)})
    assert np.array_equal(raw["dlogits"].view(np.uint16), out["dlogits"].view(np.uint16))


def test_run_rejects_what_it_cannot_borrow():
    module = tpuoff.load(tpuoff.kernel_hlo("grpo_tiled", mode="fwd", **SMALL))
    inputs = small_inputs()
    cases = {
        "float64": inputs["logits"].astype(np.float64),
        "fortran": np.asfortranarray(inputs["logits"]),
        "strided": np.concatenate([inputs["logits"]] * 2, -1)[..., ::2],
        "misaligned": np.zeros(inputs["logits"].nbytes + 1, np.uint8)[1:].view(np.float32)
                      .reshape(2, 4, 100),
        "list": inputs["logits"].tolist(),
    }
    messages = {"float64": "got a float64 array.*never converts", "fortran": "not C-contiguous",
                "strided": "not C-contiguous", "misaligned": "not aligned",
                "list": "is a list"}
    for what, bad in cases.items():
        with pytest.raises(ValueError, match=messages[what]):
            tpuoff.run(module, {**inputs, "logits": bad})
    with pytest.raises(ValueError, match=r"got shape \(2, 4, 99\)"):
        tpuoff.run(module, {**inputs, "logits": inputs["logits"][..., :99].copy()})
    with pytest.raises(ValueError, match="missing input 'old_logp'"):
        tpuoff.run(module, {k: v for k, v in inputs.items() if k != "old_logp"})
    with pytest.raises(ValueError, match="unknown input 'ref_logp'.*expected inputs:"):
        tpuoff.run(module, {**inputs, "ref_logp": inputs["old_logp"]})
    with pytest.raises(ValueError, match="expected a numpy array, got str"):
        tpuoff.run(module, {**inputs, "old_logp": "x"})


def test_run_partitioned_takes_global_arrays():
    # V = 100 over 8 devices: shards of 13, the last one 9 real columns.
    inputs = small_inputs()
    whole = tpuoff.run(tpuoff.kernel_hlo("grpo_tiled", mode="fwd_bwd", **SMALL), inputs)
    for shard, mesh in (("vocab", 8), ("batch", 2)):
        sharded, stats = tpuoff.run(
            tpuoff.kernel_hlo("grpo_tiled", mode="fwd_bwd", mesh=mesh, shard=shard, **SMALL),
            inputs, return_stats=True)
        assert len(stats["devices"]) == mesh
        assert list(sharded) == list(whole)
        for name in whole:
            vectors.assert_close(sharded[name], whole[name], 1e-6, 1e-5, f"{shard} {name}")


def test_run_spmd_module_per_device_inputs():
    text = """HloModule spmd, num_partitions=2
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (x: f32[3]) -> f32[3] {
  %x = f32[3] parameter(0)
  ROOT %r = f32[3] all-reduce(%x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%add
}
"""
    x0, x1 = np.arange(3, dtype=np.float32), np.full(3, 10, np.float32)
    out = tpuoff.run(text, {"x": [x0, x1]})
    assert sorted(out) == ["output_0.device0", "output_0.device1"]
    for a in out.values():
        assert np.array_equal(a, x0 + x1)
    shared = tpuoff.run(text, {"x": x0})
    assert np.array_equal(shared["output_0.device1"], 2 * x0)
    with pytest.raises(ValueError, match="lists 1 arrays for 2 devices"):
        tpuoff.run(text, {"x": [x0]})


def test_run_scalar_parameters_take_python_numbers():
    inputs = small_inputs()
    module = tpuoff.kernel_hlo("grpo_tiled", mode="fwd", token_count_input=True, **SMALL)
    a = tpuoff.run(module, {**inputs, "total_valid_tokens": 5})
    b = tpuoff.run(module, {**inputs, "total_valid_tokens": np.float32(10)})
    assert np.isclose(a["loss"], 2 * b["loss"], rtol=1e-6)


def test_run_releases_the_gil():
    # A 1.2M-element module runs for a while; a Python thread must make
    # progress while it runs (it could not if the GIL were held).
    module = tpuoff.load(tpuoff.kernel_hlo("grpo_reference", mode="fwd_bwd", batch=4, seq=64,
                                           vocab=4096))
    inputs = small_inputs(b=4, t=64, v=4096)
    state = {"running": False, "ticks_while_running": 0, "done": False}

    def ticker():
        while not state["done"]:
            if state["running"]:
                state["ticks_while_running"] += 1
            time.sleep(0)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        for _ in range(3):
            state["running"] = True
            tpuoff.run(module, inputs, threads=1)
            state["running"] = False
    finally:
        state["done"] = True
        t.join()
    assert state["ticks_while_running"] > 0


def test_errors_map_status_codes():
    inputs = small_inputs()
    text = tpuoff.kernel_hlo("grpo_tiled", mode="fwd", **SMALL)
    with pytest.raises(MemoryError, match="device 0: out of HBM") as e:
        tpuoff.run(text, inputs, hbm_gib=1e-6)
    assert isinstance(e.value, tpuoff.ResourceExhaustedError) and e.value.code == "RESOURCE_EXHAUSTED"
    with pytest.raises(FileNotFoundError, match="/no/such/module.hlo"):
        tpuoff.load("/no/such/module.hlo")
    with pytest.raises(ValueError, match=r"<text>:1:1: expected 'HloModule'"):
        tpuoff.load(text.replace("HloModule", "HloModul"))
    with pytest.raises(ValueError, match="backend must be one of"):
        tpuoff.run(text, inputs, backend="tpu")
    assert issubclass(tpuoff.NotFoundError, tpuoff.Error)


def test_load_from_path(tmp_path):
    path = tmp_path / "m.pb"
    path.write_bytes(tpuoff.kernel_hlo("entropy_tiled", format="proto", **SMALL))
    m = tpuoff.load(path)
    assert m.name == "entropy_tiled" and tpuoff.load(str(path)).text() == m.text()
    out = tpuoff.run(path, {"logits": small_inputs()["logits"]})
    assert out["entropy"].shape == (2, 4)


# --- memory -------------------------------------------------------------------------------

@pytest.mark.parametrize("flags", [
    dict(kernel="grpo_tiled", mode="fwd_bwd", logits_dtype="bf16", batch=1, seq=512, vocab=32768),
    dict(kernel="grpo_tiled", mode="fwd_bwd", batch=8, seq=16, vocab=1000, mesh=8, shard="vocab"),
    dict(kernel="grpo_fused_linear", mode="fwd_bwd", batch=1, seq=64, vocab=5000, hidden=64),
])
def test_memory_is_the_cli_json(flags):
    ours = tpuoff.memory(tpuoff.kernel_hlo(**flags))
    args = [f"--{k.replace('_', '-')}={v}" for k, v in flags.items()]
    cli = json.loads(subprocess.run([CLI, "memory", "--json", *args],
                                    check=True, capture_output=True, text=True).stdout)
    assert ours == cli
    assert ours["groups"][0]["peak_bytes"] > 0


def test_memory_peak_is_the_run_peak():
    inputs = small_inputs()
    text = tpuoff.kernel_hlo("grpo_tiled", mode="fwd_bwd", **SMALL)
    _, stats = tpuoff.run(text, inputs, return_stats=True)
    assert tpuoff.memory(text)["groups"][0]["peak_bytes"] == stats["devices"][0]["peak_hbm_bytes"]

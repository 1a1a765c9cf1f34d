"""tpuoff.run at its edges: Ctrl-C during an endless loop, empty and complex
arrays, NUL bytes in paths, arrays and numbers it must refuse rather than
convert, and chosen_ids of wider integer types through the JAX adapter."""
import _thread
import os
import pathlib
import re
import subprocess
import sys
import threading
import time

import jax.numpy as jnp
import numpy as np
import pytest

import tpuoff
import tpuoff.jax as tj
from test_jax_api import CASE, args

# A while loop that never ends by itself (shared with the C++ and CLI tests).
ENDLESS = (pathlib.Path(__file__).resolve().parents[2] / "tests/cli/data/endless.hlo").read_text()


def interrupt_after(seconds):
    timer = threading.Timer(seconds, _thread.interrupt_main)
    timer.start()
    return timer


@pytest.mark.parametrize("spmd", [False, True])
def test_ctrl_c_stops_an_endless_emulator_run(spmd):
    text = ENDLESS.replace("HloModule endless", "HloModule endless, num_partitions=2") \
        if spmd else ENDLESS
    module = tpuoff.load(text)
    timer = interrupt_after(0.5)
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            # (the time limit only ends the run if the interrupt is lost)
            tpuoff.run(module, {"x": np.int32(0)}, timeout=60)
    finally:
        timer.cancel()
    note = "\n".join(getattr(e.value, "__notes__", []))
    assert re.search(r"tpuoff.run stopped: device \d+: cancelled in while loop %w .*iteration",
                     note), note
    # The module and the process are fine afterwards: a bounded run works.
    with pytest.raises(MemoryError, match="did not finish within the limit of 5 iterations"):
        tpuoff.run(module, {"x": np.int32(0)}, max_loop_iterations=5)


@pytest.mark.skipif(not tpuoff.pjrt_info()["available"], reason="no PJRT backend")
def test_pjrt_endless_loop_stops_at_the_limit_and_on_ctrl_c():
    # The plugin runs in a child process: killed at timeout=, or on Ctrl-C.
    module = tpuoff.load(ENDLESS)
    with pytest.raises(TimeoutError, match=r"running endless with .*: exceeded the time limit "
                                           r"of 1 s \(the plugin's process was killed\)") as e:
        tpuoff.run(module, {"x": np.int32(0)}, backend="pjrt", timeout=1)
    assert isinstance(e.value, tpuoff.DeadlineExceededError)
    timer = interrupt_after(1.0)
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            tpuoff.run(module, {"x": np.int32(0)}, backend="pjrt", timeout=120)
    finally:
        timer.cancel()
    note = "\n".join(getattr(e.value, "__notes__", []))
    assert "tpuoff.run stopped: running endless with" in note and "cancelled" in note, note
    # The backend works afterwards.
    text = "HloModule m\nENTRY %main (x: s32[]) -> s32[] {\n" \
           "  %x = s32[] parameter(0)\n  ROOT %n = s32[] negate(%x)\n}\n"
    assert int(tpuoff.run(text, {"x": np.int32(4)}, backend="pjrt")["output_0"]) == -4


def test_sigint_to_the_process_stops_the_run():
    # A real SIGINT (what Ctrl-C sends) to a process inside tpuoff.run: it
    # ends with KeyboardInterrupt, it does not keep running.
    code = ("import sys, tpuoff, numpy as np\n"
            f"m = tpuoff.load({ENDLESS!r})\n"
            "print('running', flush=True)\n"
            "try:\n"
            "    tpuoff.run(m, {'x': np.int32(0)})\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted', flush=True)\n"
            "    sys.exit(3)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "running"
        time.sleep(1.0)
        proc.send_signal(2)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3 and "interrupted" in out


def test_empty_arrays_are_inputs():
    text = """HloModule empty
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (x: f32[0,5]) -> (f32[5], f32[0,5]) {
  %x = f32[0,5] parameter(0)
  %z = f32[] constant(0)
  %r = f32[5] reduce(%x, %z), dimensions={0}, to_apply=%add
  %n = f32[0,5] negate(%x)
  ROOT %t = (f32[5], f32[0,5]) tuple(%r, %n)
}
"""
    x = np.zeros((0, 5), np.float32)
    out = tpuoff.run(text, {"x": x})
    assert np.array_equal(out["output_0"], np.zeros(5, np.float32))
    assert out["output_1"].shape == (0, 5) and out["output_1"].dtype == np.float32
    # NumPy's own empty arrays with zero strides (np.empty_like of a broadcast).
    y = np.broadcast_to(np.float32(1), (0, 5))
    assert tpuoff.run(text, {"x": y})["output_1"].shape == (0, 5)


@pytest.mark.parametrize("ctype,ftype", [("c64", np.float32), ("c128", np.float64)])
def test_complex_inputs_and_outputs(ctype, ftype):
    ft = "f32" if ctype == "c64" else "f64"
    text = f"""HloModule cplx
ENTRY %main (re: {ft}[3], im: {ft}[3], z: {ctype}[3]) -> ({ctype}[3], {ft}[3]) {{
  %re = {ft}[3] parameter(0)
  %im = {ft}[3] parameter(1)
  %z = {ctype}[3] parameter(2)
  %c = {ctype}[3] complex(%re, %im)
  %m = {ctype}[3] multiply(%c, %z)
  %a = {ft}[3] real(%z)
  ROOT %t = ({ctype}[3], {ft}[3]) tuple(%m, %a)
}}
"""
    re = np.array([1, 2, -3], ftype)
    im = np.array([0.5, -1, 4], ftype)
    z = np.array([2 - 1j, 0.25j, -1 + 3j], np.complex64 if ctype == "c64" else np.complex128)
    out = tpuoff.run(text, {"re": re, "im": im, "z": z})
    assert out["output_0"].dtype == z.dtype and out["output_0"].shape == (3,)
    want = (re + 1j * im) * z
    np.testing.assert_allclose(out["output_0"], want, rtol=1e-6 if ctype == "c64" else 1e-15)
    assert np.array_equal(out["output_1"], z.real)


def test_paths_with_a_nul_byte_are_refused(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(ENDLESS)
    for bad in (str(path) + "\0.other", "/etc/passwd\0.hlo"):
        with pytest.raises(ValueError, match="path contains a NUL byte"):
            tpuoff.load(bad)
    with pytest.raises(ValueError, match="pjrt_plugin contains a NUL byte"):
        tpuoff.run(ENDLESS, {"x": np.int32(0)}, backend="pjrt", pjrt_plugin="/tmp/x\0y.so")
    assert tpuoff.load(path).name == "endless"


def test_arrays_dlpack_cannot_describe_name_their_dtype():
    text = "HloModule m\nENTRY %main (x: f32[2]) -> f32[2] {\n" \
           "  ROOT %x = f32[2] parameter(0)\n}\n"
    for bad, shown in ((np.zeros(2, ">f4"), ">f4"), (np.zeros(2, object), "|O"),
                       (np.zeros(2, "V4"), "|V4"), (np.zeros(2, "U1"), "<U1")):
        with pytest.raises(ValueError, match=f"ndarray of dtype {re.escape(shown)} cannot be "
                                             "borrowed.*the parameter is float32"):
            tpuoff.run(text, {"x": bad})


def test_numbers_are_not_truncated():
    text = "HloModule m\nENTRY %main (n: s32[]) -> s32[] {\n" \
           "  ROOT %n = s32[] parameter(0)\n}\n"
    assert int(tpuoff.run(text, {"n": 7})["output_0"]) == 7
    with pytest.raises(TypeError, match="input 'n': a float scalar for a s32 parameter"):
        tpuoff.run(text, {"n": 2.7})
    with pytest.raises(ValueError, match="input 'n': 4294967296 is outside s32's range"):
        tpuoff.run(text, {"n": 2**32})
    for key, value, error, message in (
            ("threads", 2.7, TypeError, "threads must be an int, got float"),
            ("threads", True, TypeError, "threads must be an int, got bool"),
            ("threads", 2**31, ValueError, r"threads must be in \[0, 4096\]"),
            ("max_loop_iterations", 2**64, ValueError, "max_loop_iterations must be in"),
            ("timeout", "1", TypeError, "timeout must be a number, got str")):
        with pytest.raises(error, match=message):
            tpuoff.run(text, {"n": 1}, **{key: value})
    with pytest.raises(ValueError, match=r"memory\(\): top must be in"):
        tpuoff.memory(text, top=2**31)
    with pytest.raises(TypeError, match="use tpuoff.load"):
        tpuoff.Module(None)


def test_jax_chosen_ids_of_wider_types_do_not_wrap():
    z, ids, mask, adv, old, ref = args()
    ids = np.asarray(ids)
    v = z.shape[-1]
    outside = ids.astype(np.int64)
    outside[0, 0] = 2**32 + int(ids[0, 0])  # int32 would wrap it back onto ids[0, 0]
    minus = ids.copy()
    minus[0, 0] = -1
    got = tj.grpo_loss(z, outside, mask, adv, old, ref, beta=0.04)
    want = tj.grpo_loss(z, minus, mask, adv, old, ref, beta=0.04)
    same = tj.grpo_loss(z, ids, mask, adv, old, ref, beta=0.04)
    assert float(got[0]) == float(want[0])
    assert float(got[0]) != float(same[0]), "the id must not wrap onto a valid one"
    assert np.asarray(got[1]["logp"])[0, 0] == np.asarray(want[1]["logp"])[0, 0]
    # uint32 ids above int32's range, and ids inside it stay themselves.
    big = ids.astype(np.uint32)
    big[0, 0] = 2**31 + 7
    assert float(tj.grpo_loss(z, big, mask, adv, old, ref, beta=0.04)[0]) == float(want[0])
    assert float(tj.grpo_loss(z, ids.astype(np.int64), mask, adv, old, ref,
                              beta=0.04)[0]) == float(same[0])
    assert v > int(ids.max())
    with pytest.raises(TypeError, match="chosen_ids must be an integer array, got float32"):
        tj.grpo_loss(z, jnp.asarray(ids, jnp.float32), mask, adv, old, ref, beta=0.04)
    assert CASE is not None

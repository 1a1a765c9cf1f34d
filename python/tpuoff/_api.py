"""The tpuoff core API: kernel modules, the host emulator, the memory analysis."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from tpuoff import _tpuoff

try:  # bf16 arrays on the NumPy side
    import ml_dtypes as _ml_dtypes

    _BFLOAT16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes comes with jax
    _ml_dtypes = None
    _BFLOAT16 = None

BACKENDS = ("emulator", "pjrt")


@functools.cache
def kernel_option_names() -> tuple[str, ...]:
    """Every keyword kernel_hlo takes: the CLI's kernel and sharding flags
    (``tpuoff dump --help``) with ``_`` for ``-``."""
    return tuple(n.replace("-", "_") for n in _tpuoff.kernel_flag_names())


def _flag_value(function: str, key: str, value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, str):
        return value
    if key in ("mesh", "shard") and isinstance(value, (tuple, list)):
        # mesh=(2, 4) -> --mesh=2x4, shard=("batch", "vocab") -> --shard=batch,vocab
        return ("x" if key == "mesh" else ",").join(str(v) for v in value)
    raise TypeError(f"{function}(): {key} must be a number, bool or str, "
                    f"got {type(value).__name__}")


def kernel_flags(function: str, options: Mapping[str, Any]) -> list[str]:
    """CLI flags for keyword options; TypeError naming an unknown keyword.
    None means "the default" and is left out."""
    known = kernel_option_names()
    args = []
    for key, value in options.items():
        if key not in known:
            raise TypeError(f"{function}() got an unexpected keyword argument '{key}' "
                            f"(kernel options: {', '.join(known)})")
        if value is None:
            continue
        args.append(f"--{key.replace('_', '-')}={_flag_value(function, key, value)}")
    return args


def kernel_hlo(kernel: str | None = None, *, format: str = "text", **options: Any) -> str | bytes:
    """The HLO module of a tpuoff kernel, as ``tpuoff dump --kernel=...`` writes it.

    ``kernel`` is grpo_reference, grpo_tiled, entropy_reference, entropy_tiled
    or grpo_fused_linear. Every kernel and sharding flag of the CLI is a keyword,
    named like the flag with ``_`` for ``-``: mode, batch, seq, vocab,
    logits_dtype, eps_low, eps_high, temperature, temperature_mode, beta, delta,
    loss_type, max_len, token_count_input, on_policy, block_size, hidden,
    token_chunk, mesh, shard, global_form, ... (:func:`kernel_option_names`
    lists them). They are parsed and checked by the CLI's own flag code: the
    same defaults, the same checks, the same messages (ValueError). None leaves
    an option at its default.

    ``format``: "text" (HLO text, a str), "proto" (binary HloModuleProto,
    bytes) or "json" (its protobuf JSON, a str).
    """
    if kernel is not None:
        options = {"kernel": kernel, **options}
    if format not in ("text", "proto", "json"):
        raise ValueError(f'format must be "text", "proto" or "json", got {format!r}')
    return _tpuoff.kernel_hlo(kernel_flags("kernel_hlo", options), format)


class Module:
    """A parsed and verified HLO module (from text, proto bytes or a file)."""

    __slots__ = ("_core", "_signature")

    def __init__(self, core: Any):
        if not isinstance(core, _tpuoff.HloModule):
            raise TypeError(f"tpuoff.Module wraps a parsed module: use tpuoff.load(...) for "
                            f"HLO text, bytes or a path, got {type(core).__name__}")
        self._core = core
        self._signature = None

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def signature(self) -> dict:
        """{"name", "num_partitions", "partitioned", "parameters", "outputs"};
        each parameter/output {"name", "dtype", "shape", "global_shape"}."""
        if self._signature is None:
            self._signature = _tpuoff.signature(self._core)
        return self._signature

    def text(self) -> str:
        return _tpuoff.serialize(self._core, "text")

    def proto(self) -> bytes:
        return _tpuoff.serialize(self._core, "proto")

    def __repr__(self) -> str:
        return f"<tpuoff.Module {self.name}>"


def _looks_like_module_text(text: str) -> bool:
    head = text.lstrip()[:64]
    return head.startswith("HloModule") or head.startswith("{") or "\n" in text


def load(module: Any) -> Module:
    """A :class:`Module` from HLO text (str), module bytes (text, binary
    HloModuleProto or proto JSON; detected), a path (str or os.PathLike), or a
    Module (returned as is). Parse errors name the place (FILE:LINE:COL)."""
    if isinstance(module, Module):
        return module
    if isinstance(module, (bytes, bytearray, memoryview)):
        return Module(_tpuoff.module_from_bytes(bytes(module), "<bytes>"))
    if isinstance(module, str) and _looks_like_module_text(module):
        return Module(_tpuoff.module_from_bytes(module.encode(), "<text>"))
    if isinstance(module, (str, os.PathLike)):
        return Module(_tpuoff.module_from_file(os.fsdecode(module)))
    raise TypeError(f"expected HLO text, module bytes, a path or a tpuoff.Module, "
                    f"got {type(module).__name__}")


def signature(module: Any) -> dict:
    """Parameter and output names, dtypes and shapes of a module."""
    return load(module).signature


def memory(module: Any, *, hbm_gib: float = 32.0, top: int = 10) -> dict:
    """The static per-device HBM analysis of a module, without running it: the
    document ``tpuoff memory --json`` prints (peak bytes, placement, the
    argument/output/temp split, the largest live buffers, the TPU-padded view,
    whether it fits in ``hbm_gib``)."""
    return json.loads(_tpuoff.memory_json(load(module)._core,
                                          _number("memory", "hbm_gib", hbm_gib),
                                          _integer("memory", "top", top, 0, 2**31 - 1)))


def _integer(function: str, key: str, value: Any, low: int, high: int) -> int:
    """An integer keyword: TypeError for a bool, float or other type (never
    truncated), ValueError outside [low, high]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{function}(): {key} must be an int, got {type(value).__name__}")
    if not low <= int(value) <= high:
        raise ValueError(f"{function}(): {key} must be in [{low}, {high}], got {value}")
    return int(value)


def _number(function: str, key: str, value: Any) -> float:
    """A float keyword (ints too; not bools or strings)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                     np.floating)):
        raise TypeError(f"{function}(): {key} must be a number, got {type(value).__name__}")
    return float(value)


def _as_input(value: Any, dtype: str | None, name: str = "") -> Any:
    """The object handed to the core for one input: bf16 arrays as their
    uint16 bits (a view), Python/NumPy scalars as 0-d arrays of the
    parameter's type; everything else as it is (the core borrows it or
    refuses it, it never copies)."""
    if isinstance(value, (list, tuple)):
        return [_as_input(v, dtype, name) for v in value]
    if isinstance(value, np.ndarray):
        if _BFLOAT16 is not None and value.dtype == _BFLOAT16:
            return value.view(np.uint16)
        return value
    if isinstance(value, (bool, int, float, np.generic)) and dtype is not None:
        np_type = np.uint16 if dtype == "bf16" else _NUMPY_TYPES.get(dtype)
        if np_type is None:
            return value
        # A scalar is converted only where no value changes kind: a float
        # for an integer or pred parameter, or a non-bool for pred, is
        # refused (never truncated).
        kind = np.dtype(np_type).kind if dtype != "bf16" else "f"
        given = np.asarray(value).dtype.kind
        if (kind in "iu" and given not in "iub") or (kind == "b" and given != "b"):
            raise TypeError(f"run(): input {name!r}: a {type(value).__name__} scalar for a "
                            f"{dtype} parameter")
        if kind in "iu" and given in "iu":
            info = np.iinfo(np_type)
            if not info.min <= int(value) <= info.max:
                raise ValueError(f"run(): input {name!r}: {value} is outside {dtype}'s range "
                                 f"[{info.min}, {info.max}]")
        if dtype == "bf16":
            if _BFLOAT16 is None:
                raise TypeError("bf16 scalars need ml_dtypes")
            return np.asarray(value, dtype=_BFLOAT16).view(np.uint16)
        return np.asarray(value, dtype=np_type)
    return value


_NUMPY_TYPES = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64,
}


def _as_output(array: Any, type_name: str) -> Any:
    if type_name == "bfloat16" and _BFLOAT16 is not None:
        return array.view(_BFLOAT16)
    return array


# Keywords of run() that only the emulator has (the CLI refuses the same
# flags with --backend=pjrt), and their defaults.
_EMULATOR_ONLY = {"threads": 0, "hbm_gib": 32.0, "max_loop_iterations": 0, "timeout": 0.0,
                  "collective_timeout": 60.0}


def pjrt_info() -> dict:
    """Whether this build has the PJRT backend (``available``) and the plugins
    it found when it was built (``cpu_plugin``: the XLA CPU plugin run(...,
    backend="pjrt") uses by default; ``tpu_plugin``: libtpu), as ``tpuoff run
    --backend=pjrt`` finds them (tools/pjrt/setup_plugins.sh's venv)."""
    return dict(_tpuoff.pjrt_info())


def run(module: Any, inputs: Mapping[str, Any], backend: str = "emulator", *,
        threads: int | None = None, hbm_gib: float | None = None,
        max_loop_iterations: int | None = None, timeout: float | None = None,
        collective_timeout: float | None = None, pjrt_plugin: str | os.PathLike | None = None,
        return_stats: bool = False):
    """Runs a module as ``tpuoff run`` does and returns ``{output name: numpy array}``.

    ``module``: HLO text, module bytes, a path or a :class:`Module`.
    ``inputs``: one array per entry parameter, by name. Arrays are borrowed,
    never copied or converted: each must have the parameter's dtype and shape
    and be C-contiguous and aligned, or the call raises ValueError saying why
    (bf16 parameters take ``ml_dtypes.bfloat16`` arrays, or uint16 arrays of
    the raw bits; rank-0 parameters also take Python numbers). A partitioned
    module (``kernel_hlo(..., mesh=N, shard="batch"|"vocab")``) takes and
    returns GLOBAL arrays, split and reassembled by its shardings as
    ``tpuoff run`` does; other SPMD modules take one array for every device
    or a list of one per device, and return ``name.deviceD`` outputs.

    ``backend``: "emulator" (the host emulator of TPU v6e devices) or "pjrt"
    (a PJRT plugin: ``pjrt_plugin``, a path, or by default the XLA CPU plugin
    this build found, :func:`pjrt_info`; an SPMD module runs on
    num_partitions of its devices as is; a build without the PJRT backend
    raises tpuoff.FailedPreconditionError saying how to build it).

    Emulator options (the CLI's flags of the same names; refused with
    backend="pjrt", except ``timeout``): ``hbm_gib`` HBM per device (default 32; running out
    raises MemoryError), ``threads`` host threads (default 0 = all),
    ``max_loop_iterations`` (a while loop running more fails the run,
    MemoryError/ResourceExhaustedError; default 0 = no limit), ``timeout``
    seconds for the whole run (tpuoff.DeadlineExceededError, a TimeoutError,
    naming the loop and instruction; default 0 = none),
    ``collective_timeout`` seconds a device waits at a collective (default 60).
    A run the host cannot hold (device buffers, the pieces of partitioned
    inputs, outputs) is refused before anything is allocated (MemoryError).

    Outputs are the backend's own buffers handed to NumPy (no copy); bf16
    outputs are ``ml_dtypes.bfloat16`` arrays (uint16 bits without ml_dtypes).
    The GIL is released while the module runs. Ctrl-C (or any signal handler
    that raises) stops the run and raises KeyboardInterrupt (or what the
    handler raised): the emulator stops at its devices' next step; a PJRT
    plugin runs in a child process, which is killed (so are plugins that
    crash: an error naming the signal; ``timeout`` applies to it too). Complex outputs are complex64/complex128
    arrays. With ``return_stats``, returns
    ``(outputs, stats)``: ``devices`` (the emulator's peak HBM bytes per
    device; empty for PJRT), ``wall_seconds``, ``backend`` and ``summary``
    (for PJRT: the plugin, its API version, compile and execute times).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if not isinstance(inputs, Mapping):
        raise TypeError(f"inputs must be a mapping of parameter name to array, "
                        f"got {type(inputs).__name__}")
    given = {"threads": threads, "hbm_gib": hbm_gib, "max_loop_iterations": max_loop_iterations,
             "timeout": timeout, "collective_timeout": collective_timeout}
    if backend == "pjrt":
        for key, value in given.items():
            if value is not None and key != "timeout":
                raise ValueError(f"run(): {key} applies to the emulator, not backend='pjrt'")
    elif pjrt_plugin is not None:
        raise ValueError("run(): pjrt_plugin needs backend='pjrt'")
    opts = {k: _EMULATOR_ONLY[k] if v is None else v for k, v in given.items()}
    m = load(module)
    dtypes = {p["name"]: p["dtype"] for p in m.signature["parameters"]}
    prepared = {str(k): _as_input(v, dtypes.get(str(k)), str(k)) for k, v in inputs.items()}
    outputs, stats = _tpuoff.run(
        m._core, prepared, backend, _integer("run", "threads", opts["threads"], 0, 4096),
        _number("run", "hbm_gib", opts["hbm_gib"]),
        _integer("run", "max_loop_iterations", opts["max_loop_iterations"],
                 -2**63, 2**63 - 1),
        _number("run", "timeout", opts["timeout"]),
        _number("run", "collective_timeout", opts["collective_timeout"]),
        "" if pjrt_plugin is None else os.fsdecode(pjrt_plugin))
    result = {name: _as_output(array, type_name) for name, array, type_name in outputs}
    return (result, stats) if return_stats else result

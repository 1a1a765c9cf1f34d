#!/usr/bin/env python3
"""Run an HLO module on real XLA (jaxlib, CPU) and compare output directories.

Python side of the tpuoff XLA conformance harness.  Library + CLI:

  xla_run.py run MODULE --inputs DIR --outputs DIR [--format auto|text|proto]
                        [--num-partitions N]
  xla_run.py compare GOT_DIR REF_DIR [--atol A --rtol R] [--ref-prefix expected_]
  xla_run.py opcodes MODULE...          sorted opcode list of HLO module(s)
  xla_run.py to-proto MODULE OUT.pb     parse with XLA, write serialized HloModuleProto

Only pinned jax/jaxlib (requirements.txt) is supported: every jaxlib entry point this
file uses is probed in `_require_api()` and a missing one is a loud error, never a
silent fallback.  jax is imported lazily so that the CPU device count can be set
before the backend initialises.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from xla_shardings import (HarnessError, ShardSpec, assemble_global, crop_to,  # noqa: F401
                           global_shape, shard_spec, split_global)

# ----------------------------------------------------------------------------------
# jax / jaxlib access (lazy)
# ----------------------------------------------------------------------------------

_JAX = None


def ensure_cpu_devices(n: int) -> None:
    """Make sure jax's CPU backend has at least n devices.  Must run before the
    backend initialises (i.e. before the first computation / device query)."""
    global _JAX
    if _JAX is None:
        import jax  # noqa: F401  (import only; the backend is created lazily)
        _JAX = jax
    jax = _JAX
    jax.config.update("jax_platforms", "cpu")
    if n > 1:
        try:
            jax.config.update("jax_num_cpu_devices", n)
        except Exception as e:  # backend already initialised, or option missing
            have = len(jax.devices("cpu"))
            if have < n:
                raise HarnessError(
                    f"need {n} CPU devices but jax already has {have} "
                    f"(set jax_num_cpu_devices / XLA_FLAGS=--xla_force_host_platform_"
                    f"device_count={n} before jax initialises): {e}") from e


def _jax():
    global _JAX
    if _JAX is None:
        import jax
        _JAX = jax
    return _JAX


def _xc():
    _jax()
    from jax._src.lib import xla_client as xc  # noqa: WPS433
    return xc


def _require_api():
    """Probe the jaxlib entry points we rely on; fail loudly if one moved."""
    jax = _jax()
    xc = _xc()
    import jax.extend.mlir  # noqa: F401
    import jax.extend.backend  # noqa: F401
    need = {
        "xla_client.hlo.hlo_module_from_text": getattr(getattr(xc, "hlo", None), "hlo_module_from_text", None),
        "xla_client.hlo.HloModule.from_serialized_hlo_module_proto":
            getattr(getattr(getattr(xc, "hlo", None), "HloModule", None), "from_serialized_hlo_module_proto", None),
        "xla_client.hlo.HloPrintOptions": getattr(getattr(xc, "hlo", None), "HloPrintOptions", None),
        "xla_client.XlaComputation": getattr(xc, "XlaComputation", None),
        "xla_client.HloSharding.from_string": getattr(getattr(xc, "HloSharding", None), "from_string", None),
        "xla_client.CompileOptions": getattr(xc, "CompileOptions", None),
        "xla_client.DeviceAssignment.create": getattr(getattr(xc, "DeviceAssignment", None), "create", None),
        "xla_client.DeviceList": getattr(xc, "DeviceList", None),
        "jax.extend.mlir.hlo_to_stablehlo": getattr(jax.extend.mlir, "hlo_to_stablehlo", None),
        "jax.extend.backend.get_backend": getattr(jax.extend.backend, "get_backend", None),
        "Client.compile_and_load": getattr(getattr(xc, "Client", None), "compile_and_load", None),
        "LoadedExecutable.execute_sharded": getattr(getattr(xc, "LoadedExecutable", None), "execute_sharded", None),
        "LoadedExecutable.get_compiled_memory_stats":
            getattr(getattr(xc, "LoadedExecutable", None), "get_compiled_memory_stats", None),
    }
    missing = [k for k, v in need.items() if v is None]
    if missing:
        raise HarnessError(
            f"jaxlib {getattr(jax, '__version__', '?')} lacks required API: {', '.join(missing)}; "
            "use the versions pinned in tools/xla_check/requirements.txt")
    return xc


# ----------------------------------------------------------------------------------
# HLO text helpers
# ----------------------------------------------------------------------------------

def print_options(metadata: bool = True, result_shape: bool = True):
    xc = _xc()
    o = xc.hlo.HloPrintOptions()
    o.print_large_constants = True  # elided "{...}" constants would be garbage on re-parse
    o.print_metadata = metadata
    o.print_result_shape = result_shape
    return o


def module_text(module, metadata: bool = True) -> str:
    return module.to_string(print_options(metadata=metadata))


def _balanced(s: str, i: int) -> int:
    """s[i] == '{'; return index just past the matching '}'."""
    assert s[i] == "{", s[i:i + 20]
    depth = 0
    in_str = False
    j = i
    while j < len(s):
        c = s[j]
        if in_str:
            if c == "\\":
                j += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise HarnessError(f"unbalanced braces in: {s[i:i + 80]}")


def find_attr(line: str, attr: str) -> Optional[tuple[int, int, str]]:
    """Find `attr={...}` in one printed instruction/header line (outside strings).
    Returns (start of 'attr=', end, '{...}' text) or None."""
    for m in re.finditer(r"(?<![\w.\-])" + re.escape(attr) + r"=\{", line):
        # skip matches inside a string literal (e.g. metadata op_name)
        if line[:m.start()].count('"') % 2:
            continue
        b = m.end() - 1
        e = _balanced(line, b)
        return m.start(), e, line[b:e]
    return None


def header_line(text: str) -> str:
    for ln in text.splitlines():
        if ln.startswith("HloModule"):
            return ln
    raise HarnessError("no 'HloModule' header in module text")


def output_names_from_text(text: str) -> Optional[list[str]]:
    hdr = header_line(text)
    fa = find_attr(hdr, "frontend_attributes")
    if not fa:
        return None
    m = re.search(r'(?<![\w])output_names="([^"]*)"', fa[2])
    if not m:
        return None
    return [n.strip() for n in m.group(1).split(",")]


def header_int(text: str, key: str) -> Optional[int]:
    m = re.search(r"(?<![\w])" + key + r"=(\d+)", header_line(text))
    return int(m.group(1)) if m else None


def entry_block(text: str) -> tuple[int, int, list[str]]:
    """(first line index, last line index (the closing brace), lines) of ENTRY."""
    lines = text.splitlines()
    start = None
    for i, ln in enumerate(lines):
        if ln.startswith("ENTRY "):
            start = i
            break
    if start is None:
        raise HarnessError("module text has no ENTRY computation")
    for j in range(start + 1, len(lines)):
        if lines[j].strip() == "}":
            return start, j, lines
    raise HarnessError("unterminated ENTRY computation")


_INSTR_RE = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_PARAM_AT_OPCODE_RE = re.compile(r"^(?:\([^=]*?\)|\S+)\s+parameter\((\d+)\)")


@dataclass
class Param:
    number: int
    name: str
    shape: tuple
    dtype: np.dtype
    sharding: Optional[str] = None  # text, e.g. "{devices=[2,1]<=[2]}"


@dataclass
class ModuleInfo:
    name: str
    params: list  # of Param, by parameter number
    result_leaves: list  # list of (shape, dtype)
    result_is_tuple: bool
    root_sharding: Optional[str]
    output_names: list
    num_partitions_attr: Optional[int]
    text: str = field(repr=False, default="")


def _dtype_of(shape) -> np.dtype:
    return np.dtype(shape.numpy_dtype())


def _leaves(shape) -> list:
    if shape.is_tuple():
        out = []
        for s in shape.tuple_shapes():
            out.extend(_leaves(s))
        return out
    return [(tuple(shape.dimensions()), _dtype_of(shape))]


def module_info(module) -> ModuleInfo:
    xc = _xc()
    text = module_text(module)
    comp = xc.XlaComputation(module.as_serialized_hlo_module_proto())
    ps = comp.program_shape()
    pshapes = ps.parameter_shapes()
    s, e, lines = entry_block(text)
    by_num: dict[int, tuple[str, Optional[str]]] = {}
    root_sharding = None
    for ln in lines[s + 1:e]:
        m = _INSTR_RE.match(ln)
        if not m:
            continue
        name, rest = m.group(2), m.group(3)
        sh = find_attr(ln, "sharding")
        # only the opcode position counts: "<shape> parameter(N)"
        pm = _PARAM_AT_OPCODE_RE.match(rest)
        if pm:
            by_num[int(pm.group(1))] = (name, sh[2] if sh else None)
        if m.group(1):
            root_sharding = sh[2] if sh else None
    params = []
    for i, shp in enumerate(pshapes):
        if i not in by_num:
            raise HarnessError(f"entry parameter {i} not found in module text")
        if shp.is_tuple():
            raise HarnessError(f"entry parameter {i} ({by_num[i][0]}) is a tuple: unsupported")
        params.append(Param(i, by_num[i][0], tuple(shp.dimensions()), _dtype_of(shp), by_num[i][1]))
    rs = ps.result_shape()
    leaves = _leaves(rs)
    names = output_names_from_text(text)
    if names is None or len(names) != len(leaves):
        if names is not None:
            print(f"warning: output_names has {len(names)} names but the result has "
                  f"{len(leaves)} leaves; using output_<i>", file=sys.stderr)
        names = [f"output_{i}" for i in range(len(leaves))]
    return ModuleInfo(module.name, params, leaves, rs.is_tuple(), root_sharding, names,
                      header_int(text, "num_partitions"), text)


def load_module(path: str | os.PathLike, fmt: str = "auto"):
    """Parse an HLO module file with XLA.  fmt: auto | text | proto."""
    xc = _require_api()
    data = Path(path).read_bytes()
    if fmt not in ("auto", "text", "proto"):
        raise HarnessError(f"unknown --format {fmt}")
    errors = []
    if fmt in ("auto", "text"):
        try:
            txt = data.decode("utf-8")
        except UnicodeDecodeError as e:
            txt = None
            errors.append(f"not UTF-8 text ({e})")
        if txt is not None:
            try:
                return xc.hlo.hlo_module_from_text(txt), "text"
            except Exception as e:  # XLA parse error: report it
                errors.append(f"XLA HLO text parser: {e}")
                if fmt == "text" or txt.lstrip().startswith("HloModule"):
                    raise HarnessError(f"{path}: " + "; ".join(errors)) from e
    if fmt in ("auto", "proto"):
        try:
            return xc.hlo.HloModule.from_serialized_hlo_module_proto(data), "proto"
        except Exception as e:
            errors.append(f"XLA HloModuleProto loader: {e}")
    raise HarnessError(f"{path}: could not load module: " + "; ".join(errors))


def opcodes_of_module(module) -> dict:
    """{opcode: count} over all computations (fused ones included)."""
    counts: dict[str, int] = {}
    txt = module.to_string(print_options(metadata=False, result_shape=False))
    for ln in txt.splitlines():
        m = re.match(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*([a-z][a-z0-9\-]*)\(", ln)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


def manualize(text: str, info: ModuleInfo) -> str:
    """Rewrite an already-partitioned (per-device) SPMD module so that XLA's SPMD
    partitioner leaves it alone: every sharding becomes {manual} (same tuple arity),
    and entry parameters / root get one if they lacked it."""
    xc = _xc()
    lines = text.splitlines()

    def manual_of(sh: str) -> str:
        k = len(xc.HloSharding.from_string(sh).tuple_elements())
        return "{" + ", ".join(["{manual}"] * k) + "}" if k else "{manual}"

    for i, ln in enumerate(lines):
        if ln.startswith("HloModule"):
            continue
        pos = 0
        while True:
            f = find_attr(ln[pos:], "sharding")
            if not f:
                break
            a, b, sh = f
            rep = "sharding=" + manual_of(sh)
            ln = ln[:pos + a] + rep + ln[pos + b:]
            pos = pos + a + len(rep)
        lines[i] = ln
    s, e, _ = entry_block("\n".join(lines))
    nleaves = len(info.result_leaves)
    for i in range(s + 1, e):
        ln = lines[i]
        m = _INSTR_RE.match(ln)
        if not m or find_attr(ln, "sharding"):
            continue
        is_param = _PARAM_AT_OPCODE_RE.match(m.group(3)) is not None
        if m.group(1):  # ROOT
            sh = ("{" + ", ".join(["{manual}"] * nleaves) + "}") if info.result_is_tuple else "{manual}"
            lines[i] = ln + ", sharding=" + sh
        elif is_param:
            lines[i] = ln + ", sharding={manual}"
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------
# compile + run
# ----------------------------------------------------------------------------------

MEM_FIELDS = ["argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "generated_code_size_in_bytes", "peak_memory_in_bytes",
              "host_argument_size_in_bytes", "host_output_size_in_bytes", "host_alias_size_in_bytes",
              "host_temp_size_in_bytes", "host_generated_code_size_in_bytes"]


def is_global_form(text: str) -> bool:
    """A shard_map's global program (JAX's form): global parameter shapes, custom-calls
    Sharding -> SPMDFullToShardShape -> per-shard body -> SPMDShardToFullShape (GSPMD), or
    xla.sdy.GlobalToLocalShape/LocalToGlobalShape (Shardy).  XLA's SPMD partitioner makes
    it per-device; it must not be manualized."""
    return ('custom_call_target="SPMDFullToShardShape"' in text
            or 'custom_call_target="xla.sdy.GlobalToLocalShape"' in text)


def compile_module(module, num_partitions: int = 1, shardy: bool = False, compiler_options=None):
    """Compile a parsed HloModule for CPU.  Returns (executable, devices, compiled_module_text).

    Path: HloModule -> HloModuleProto bytes -> jax.extend.mlir.hlo_to_stablehlo -> StableHLO
    bytecode -> Client.compile_and_load(mlir, DeviceList, CompileOptions).  (jaxlib 0.10's
    compile_and_load only accepts MLIR; XlaComputation objects are rejected.)
    For num_partitions > 1 the module must be manual (see manualize) or a global-form
    program the SPMD partitioner handles (GSPMD, or Shardy when `shardy`)."""
    jax = _jax()
    xc = _require_api()
    import jax.extend.backend
    import jax.extend.mlir
    backend = jax.extend.backend.get_backend("cpu")
    devs = backend.devices()
    if len(devs) < num_partitions:
        raise HarnessError(f"need {num_partitions} CPU devices, jax has {len(devs)}")
    devs = devs[:num_partitions]
    mlir = jax.extend.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    opts = xc.CompileOptions()
    opts.num_replicas = 1
    opts.num_partitions = num_partitions
    if compiler_options:
        opts.env_option_overrides = list(compiler_options.items())
    if num_partitions > 1:
        opts.device_assignment = xc.DeviceAssignment.create(
            np.arange(num_partitions, dtype=np.int32).reshape(1, num_partitions))
        ebo = opts.executable_build_options
        ebo.use_spmd_partitioning = True  # required by XLA when num_partitions > 1
        # GSPMD honours HLO {manual} shardings as-is; Shardy only for sdy-annotated modules.
        ebo.use_shardy_partitioner = bool(shardy)
    exe = backend.compile_and_load(mlir, xc.DeviceList(tuple(devs)), opts)
    compiled = "\n".join(m.to_string(print_options()) for m in exe.hlo_modules())
    return exe, devs, compiled


_SHAPE_RE = re.compile(r"^\s*([a-z][a-z0-9]*)\[([0-9,\s]*)\]")


def recorded_global_shapes(text: str, key: str) -> Optional[list]:
    """Global shapes a partitioned per-device module records in a module frontend attribute
    (tpuoff's ShardMap: global_parameter_shapes / global_output_shapes, ';'-separated, e.g.
    "f32[2,5,37];s32[2,5]"): XLA pads ragged shards, so the per-device shape alone cannot
    tell the global size.  None when absent."""
    fa = find_attr(header_line(text), "frontend_attributes")
    if not fa:
        return None
    m = re.search(r'(?<![\w])' + re.escape(key) + r'="([^"]*)"', fa[2])
    if not m:
        return None
    out = []
    for item in m.group(1).split(";"):
        sm = _SHAPE_RE.match(item)
        if not sm:
            raise HarnessError(f"frontend attribute {key}: cannot parse shape '{item}'")
        dims = sm.group(2).replace(" ", "")
        out.append(tuple(int(d) for d in dims.split(",")) if dims else ())
    return out


def memory_stats(exe) -> dict:
    ms = exe.get_compiled_memory_stats()
    out = {}
    for f in MEM_FIELDS:
        if hasattr(ms, f):
            out[f] = int(getattr(ms, f))
    try:
        ca = exe.cost_analysis()
        if isinstance(ca, list):
            ca = ca[0] if ca else {}
        out["cost_analysis"] = {k: float(v) for k, v in dict(ca).items()
                                if isinstance(v, (int, float)) and ("flops" in k or k.startswith("bytes accessed")
                                                                   or k in ("transcendentals", "optimal_seconds"))}
    except Exception as e:  # cost analysis is informative only
        out["cost_analysis_error"] = str(e)
    return out


def find_input(inputs_dir: Path, p: Param) -> Path:
    cands = [p.name]
    stripped = re.sub(r"\.\d+$", "", p.name)
    if stripped != p.name:
        cands.append(stripped)
    cands.append(f"param_{p.number}")
    for c in cands:
        f = inputs_dir / f"{c}.npy"
        if f.exists():
            return f
    raise HarnessError(f"no input for entry parameter {p.number} '{p.name}' in {inputs_dir} "
                       f"(tried {', '.join(c + '.npy' for c in cands)})")


def to_param_dtype(arr: np.ndarray, dt: np.dtype, what: str, warnings: list) -> np.ndarray:
    if arr.dtype == dt:
        return arr
    out = arr.astype(dt)
    if arr.dtype.kind in "fiub" and dt.kind in "fiub" or dt.name == "bfloat16":
        back = out.astype(arr.dtype) if arr.dtype.kind != "b" else out.astype(bool)
        if not np.array_equal(back, arr, equal_nan=True):
            warnings.append(f"{what}: converting {arr.dtype} -> {dt} is inexact")
    return out


def save_output(path: Path, a: np.ndarray) -> None:
    if a.dtype.name in ("bfloat16", "float16") or a.dtype.name.startswith("float8"):
        a = a.astype(np.float32)
    np.save(path, a)


def _leaf_shardings(sharding_text: Optional[str], is_tuple: bool, count: int) -> list:
    """Per result leaf sharding text from a ROOT sharding (tuple or one for all)."""
    if sharding_text is None:
        return [None] * count
    elems = _xc().HloSharding.from_string(sharding_text).tuple_elements()
    if is_tuple and elems:
        return [str(e) for e in elems]
    return [sharding_text] * count


def run_module(module_path, inputs_dir, outputs_dir, fmt="auto", num_partitions: Optional[int] = None,
               compiler_options: Optional[dict] = None) -> dict:
    """Parse, compile and run one module on XLA CPU; write outputs, memory.json, run.json.

    Partitioned modules (num_partitions > 1) come in two forms:
      * per-device SPMD programs (tpuoff --shard): parameters/outputs are per-device
        pieces of global arrays described by their shardings; the module is manualized
        and run per device; global shapes come from the module's recorded
        global_parameter_shapes / global_output_shapes (ragged shards), else
        local * tiles;
      * global programs (JAX's shard_map form, tpuoff --global-form): XLA's SPMD
        partitioner makes them per-device; the compiled executable's parameter/output
        shardings split the inputs and reassemble the outputs, cropped to the module's
        global shapes."""
    xc = _require_api()
    t0 = time.time()
    module, got_fmt = load_module(module_path, fmt)
    info = module_info(module)
    n = num_partitions or info.num_partitions_attr or 1
    if info.num_partitions_attr and info.num_partitions_attr != n:
        print(f"warning: module says num_partitions={info.num_partitions_attr}, running with {n}",
              file=sys.stderr)
    outputs_dir = Path(outputs_dir)
    outputs_dir.mkdir(parents=True, exist_ok=True)
    text = module_text(module)
    (outputs_dir / "xla_text.hlo").write_text(text)
    warnings: list[str] = []

    global_form = n > 1 and is_global_form(text)
    exec_module = module
    if n > 1 and not global_form:
        exec_module = xc.hlo.hlo_module_from_text(manualize(text, info))
    t_parse = time.time()
    exe, devs, compiled_text = compile_module(exec_module, n, shardy="xla.sdy." in text,
                                              compiler_options=compiler_options)
    t_compile = time.time()
    (outputs_dir / "xla_compiled.hlo").write_text(compiled_text)

    # Per parameter / result leaf: the per-device shape, the sharding that splits the
    # global array, and the global shape (None: whatever the tiles make).
    nparams, nleaves = len(info.params), len(info.result_leaves)
    if n == 1:
        p_local = [p.shape for p in info.params]
        p_shard = [None] * nparams
        p_global = [p.shape for p in info.params]
        o_shard = [None] * nleaves
        o_global = [shape for shape, _ in info.result_leaves]
    elif global_form:
        cps = xc.XlaComputation(exe.hlo_modules()[0].as_serialized_hlo_module_proto()).program_shape()
        p_local = [tuple(sh.dimensions()) for sh in cps.parameter_shapes()]
        p_shard = [str(xc.HloSharding.from_proto(o)) for o in exe.get_parameter_shardings()]
        p_global = [p.shape for p in info.params]
        o_shard = [str(xc.HloSharding.from_proto(o)) for o in exe.get_output_shardings()]
        o_global = [shape for shape, _ in info.result_leaves]
        if len(p_local) != nparams or len(p_shard) != nparams or len(o_shard) != nleaves:
            raise HarnessError(f"partitioned executable has {len(p_local)} parameters / {len(o_shard)} "
                               f"outputs, module has {nparams} / {nleaves}")
    else:
        p_local = [p.shape for p in info.params]
        p_shard = [p.sharding for p in info.params]
        p_global = recorded_global_shapes(text, "global_parameter_shapes") or [None] * nparams
        o_shard = _leaf_shardings(info.root_sharding, info.result_is_tuple, nleaves)
        o_global = recorded_global_shapes(text, "global_output_shapes") or [None] * nleaves
        if len(p_global) != nparams or len(o_global) != nleaves:
            raise HarnessError(f"recorded global shapes list {len(p_global)} parameters / {len(o_global)} "
                               f"outputs, module has {nparams} / {nleaves}")

    jax = _jax()
    inputs_dir = Path(inputs_dir)
    args = []
    used = set()
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    mesh = Mesh(np.array(devs), ("p",)) if n > 1 else None
    for i, p in enumerate(info.params):
        f = find_input(inputs_dir, p)
        used.add(f.name)
        what = f"{f.name} (parameter {p.number} '{p.name}')"
        arr = to_param_dtype(np.load(f), p.dtype, f.name, warnings)
        if p_global[i] is not None and tuple(arr.shape) != tuple(p_global[i]):
            raise HarnessError(f"{what}: shape {arr.shape} != the module's global shape {tuple(p_global[i])}")
        spec = shard_spec(p_shard[i], len(p_local[i]), n) if n > 1 else ShardSpec("replicated")
        shards = split_global(arr, p_local[i], spec, n, what)
        # x64 on while placing: otherwise device_put narrows 64-bit element
        # types (u64 rng states, s64/f64 parameters) to 32 bits.
        with jax.enable_x64(True):
            bufs = [jax.device_put(s, d) for s, d in zip(shards, devs)]
        if n == 1:
            args.append(bufs[0])
        else:
            # execute_sharded only consumes the per-device buffers; wrap them in an
            # Array of the per-device shape.
            args.append(jax.make_array_from_single_device_arrays(
                tuple(p_local[i]), NamedSharding(mesh, PartitionSpec()), bufs))
    extra = sorted(x.name for x in inputs_dir.glob("*.npy") if x.name not in used)
    if extra:
        warnings.append(f"unused input files: {', '.join(extra)}")

    t_in = time.time()
    res = exe.execute_sharded(args)
    outs = res.disassemble_into_single_device_arrays()
    per_dev = [[np.asarray(b) for b in o] for o in outs]
    t_run = time.time()
    if len(per_dev) != nleaves:
        raise HarnessError(f"executable returned {len(per_dev)} outputs, module result has {nleaves} leaves")

    written = {}
    for i, (name, leaves) in enumerate(zip(info.output_names, per_dev)):
        if n == 1:
            g = leaves[0]
        else:
            spec = shard_spec(o_shard[i], leaves[0].ndim, n)
            g = crop_to(assemble_global(leaves, spec, n, name, warnings), o_global[i], name)
        save_output(outputs_dir / f"{name}.npy", g)
        written[name] = {"shape": list(g.shape), "dtype": str(g.dtype)}

    mem = memory_stats(exe)
    mem["num_partitions"] = n
    mem["note"] = "per-device executable stats from XLA CPU (LoadedExecutable.get_compiled_memory_stats)"
    (outputs_dir / "memory.json").write_text(json.dumps(mem, indent=1) + "\n")
    summary = {
        "module": str(module_path), "format": got_fmt, "module_name": info.name,
        "num_partitions": n, "global_form": global_form,
        "params": [{"number": p.number, "name": p.name, "shape": list(p.shape), "dtype": str(p.dtype),
                    "sharding": p.sharding} for p in info.params],
        "outputs": written, "root_sharding": info.root_sharding,
        "seconds": {"parse": round(t_parse - t0, 4), "compile": round(t_compile - t_parse, 4),
                    "transfer": round(t_in - t_compile, 4), "execute": round(t_run - t_in, 4)},
        "jax_version": jax.__version__, "warnings": warnings,
    }
    (outputs_dir / "run.json").write_text(json.dumps(summary, indent=1) + "\n")
    for w in warnings:
        print("warning: " + w, file=sys.stderr)
    return summary


# ----------------------------------------------------------------------------------
# compare
# ----------------------------------------------------------------------------------

def compare_arrays(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> dict:
    """b is the reference: pass when |a-b| <= atol + rtol*|b| elementwise (NaN==NaN)."""
    if a.shape != b.shape:
        return {"ok": False, "error": f"shape {a.shape} vs {b.shape}"}
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    both_nan = np.isnan(a64) & np.isnan(b64)
    same_inf = np.isinf(a64) & np.isinf(b64) & (np.sign(a64) == np.sign(b64))
    with np.errstate(invalid="ignore"):
        d = np.abs(a64 - b64)
        d = np.where(both_nan | same_inf, 0.0, d)
        d = np.where(np.isnan(d), np.inf, d)
        bound = atol + rtol * np.abs(np.where(same_inf, 0.0, b64))
        rel = d / np.maximum(np.abs(b64), np.finfo(np.float64).tiny)
    bad = d > bound
    return {"ok": not bool(bad.any()), "max_abs": float(d.max()) if d.size else 0.0,
            "max_rel": float(np.where(d == 0, 0.0, rel).max()) if d.size else 0.0,
            "n_bad": int(bad.sum()), "size": int(d.size)}


def compare_dirs(got: str, ref: str, atol: float, rtol: float, ref_prefix: str = "",
                 names: Optional[list] = None, out=sys.stdout) -> bool:
    got_p, ref_p = Path(got), Path(ref)
    if names is None:
        names = sorted(f.name[len(ref_prefix):-4] for f in ref_p.glob(f"{ref_prefix}*.npy"))
        names_got = sorted(f.name[:-4] for f in got_p.glob("*.npy"))
        if not ref_prefix:
            names = sorted(set(names) | set(names_got))
    if not names:
        print(f"FAIL: no .npy outputs to compare in {ref}", file=out)
        return False
    all_ok = True
    for nm in names:
        fa, fb = got_p / f"{nm}.npy", ref_p / f"{ref_prefix}{nm}.npy"
        if not fa.exists() or not fb.exists():
            print(f"FAIL {nm}: missing {fa if not fa.exists() else fb}", file=out)
            all_ok = False
            continue
        r = compare_arrays(np.load(fa), np.load(fb), atol, rtol)
        if "error" in r:
            print(f"FAIL {nm}: {r['error']}", file=out)
        else:
            print(f"{'ok  ' if r['ok'] else 'FAIL'} {nm}: max_abs={r['max_abs']:.3e} max_rel={r['max_rel']:.3e}"
                  + ("" if r["ok"] else f" ({r['n_bad']}/{r['size']} beyond atol={atol:g} rtol={rtol:g})"),
                  file=out)
        all_ok &= r["ok"]
    return all_ok


# ----------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="parse, compile and run an HLO module on XLA CPU")
    r.add_argument("module")
    r.add_argument("--inputs", required=True, help="dir with <param_name>.npy (global arrays)")
    r.add_argument("--outputs", required=True, help="dir for <output>.npy, memory.json, xla_text.hlo")
    r.add_argument("--format", default="auto", choices=["auto", "text", "proto"])
    r.add_argument("--num-partitions", type=int, default=None,
                   help="SPMD partitions (CPU devices); default: the module's num_partitions, else 1")
    r.add_argument("--strict", action="store_true",
                   help="exit 3 on any warning (inexact input dtype conversion, replicas that disagree, ...)")
    c = sub.add_parser("compare", help="compare two dirs of .npy outputs")
    c.add_argument("got")
    c.add_argument("ref")
    c.add_argument("--atol", type=float, default=1e-5)
    c.add_argument("--rtol", type=float, default=1e-4)
    c.add_argument("--ref-prefix", default="", help="e.g. expected_ for testdata case dirs")
    c.add_argument("--names", default=None, help="comma-separated output names (default: all)")
    o = sub.add_parser("opcodes", help="sorted opcode list of HLO module(s)")
    o.add_argument("modules", nargs="+")
    o.add_argument("--format", default="auto", choices=["auto", "text", "proto"])
    o.add_argument("--counts", action="store_true")
    t = sub.add_parser("to-proto", help="parse with XLA and write the serialized HloModuleProto")
    t.add_argument("module")
    t.add_argument("out")
    t.add_argument("--format", default="auto", choices=["auto", "text", "proto"])
    a = ap.parse_args(argv)
    try:
        if a.cmd == "run":
            if a.num_partitions is not None and a.num_partitions < 1:
                raise HarnessError("--num-partitions must be >= 1")
            n = a.num_partitions
            if n is None:  # peek at the header without initialising jax's backend
                try:
                    head = Path(a.module).read_bytes()[:4096].decode("utf-8", "ignore")
                    m = re.search(r"^HloModule[^\n]*?num_partitions=(\d+)", head, re.M)
                    n = int(m.group(1)) if m else None
                except OSError:
                    n = None
            ensure_cpu_devices(n or 1)
            s = run_module(a.module, a.inputs, a.outputs, a.format, a.num_partitions)
            print(json.dumps({k: s[k] for k in ("module_name", "format", "num_partitions", "seconds")}))
            if a.strict and s["warnings"]:
                print("xla_run: error: --strict and there were warnings", file=sys.stderr)
                return 3
            return 0
        if a.cmd == "compare":
            names = a.names.split(",") if a.names else None
            return 0 if compare_dirs(a.got, a.ref, a.atol, a.rtol, a.ref_prefix, names) else 1
        ensure_cpu_devices(1)
        if a.cmd == "opcodes":
            total: dict[str, int] = {}
            for mp in a.modules:
                mod, _ = load_module(mp, a.format)
                for k, v in opcodes_of_module(mod).items():
                    total[k] = total.get(k, 0) + v
            for k in sorted(total):
                print(f"{k} {total[k]}" if a.counts else k)
            return 0
        if a.cmd == "to-proto":
            mod, _ = load_module(a.module, a.format)
            Path(a.out).write_bytes(mod.as_serialized_hlo_module_proto())
            return 0
    except HarnessError as e:
        print(f"xla_run: error: {e}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())

"""A JAX primitive whose lowering is a tpuoff kernel module, inlined.

tpuoff emits a kernel as an HLO module; XLA (through jaxlib) converts it to
StableHLO (``jax.extend.mlir.hlo_to_stablehlo``), its functions are merged into
the module JAX is lowering (``mlir.merge_mlir_modules``), and the primitive
lowers to a ``func.call`` of its entry. So the kernel is part of the caller's
XLA program - compiled, fused, scheduled and placed by XLA with everything
else, on whatever backend runs the program - not a host callback.

Inside ``jax.shard_map`` a sharded kernel is tpuoff's per-device module for a
mesh of the named axes (``--mesh=AxB --shard=batch,vocab``: one module axis
per named JAX axis, in the order given): its collectives have replica groups
over that mesh's device numbers (row-major, the first axis major) and its
shard indices come from ``partition-id``. Those are the only mesh-dependent
things in it, and they are rewritten here to what JAX itself emits for
``psum``/``axis_index`` over those axes of the enclosing mesh (see
:func:`_map_to_mesh`), so the kernel's own merges of vocab shards and its
sums over batch and sequence shards run over exactly those axes, whatever
the other axes and however the JAX mesh orders them.

The JAX internals used here (``jax._src.interpreters.mlir``, the MLIR
bindings of jaxlib, ``ShapedArray(manual_axis_type=...)``) are those of the
pinned jax 0.10.2 (``pyproject.toml`` extra ``jax``) and are tested against it.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

import jax
import jax.extend.mlir
import jax.numpy as jnp
from jax._src import config as jax_config
from jax._src import core as jcore
from jax._src import mesh as mesh_lib
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import func as func_dialect
from jax._src.lib.mlir.dialects import hlo
from jax.extend import core as extend_core
from jax.sharding import NamedSharding, PartitionSpec

import tpuoff
from tpuoff import _tpuoff

_DTYPES = {"f32": np.dtype(np.float32), "bf16": np.dtype(jnp.bfloat16),
           "s32": np.dtype(np.int32), "f64": np.dtype(np.float64),
           "pred": np.dtype(np.bool_), "s64": np.dtype(np.int64),
           "u32": np.dtype(np.uint32), "f16": np.dtype(np.float16)}


class Port(NamedTuple):
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    # What the module's sharding splits this array by ("batch", "seq",
    # "vocab"; empty: the same on every device of its mesh; None: split in a
    # way the adapter does not know, taken as varying over every axis).
    split_kinds: frozenset[str] | None


def _split_kinds(name: str, local: tuple[int, ...], global_: tuple[int, ...]):
    """The kinds of sharding that split array `name`, by tpuoff's rules
    (kernels/grpo_sharded.cc ArraySpec): lm_head [H,V] by vocab along V;
    other arrays by batch along dim 0, seq along dim 1 and (logits, dlogits)
    vocab along dim 2. None when the local shape is split along a dimension
    the rules do not explain."""
    if name in ("lm_head", "d_lm_head"):
        by_dim = {1: "vocab"}
    else:
        by_dim = {0: "batch", 1: "seq"}
        if name in ("logits", "dlogits"):
            by_dim[2] = "vocab"
    for dim, (n, g) in enumerate(zip(local, global_)):
        if n != g and dim not in by_dim:
            return None
    return frozenset(kind for dim, kind in by_dim.items() if dim < len(local))


class Kernel:
    """One emitted tpuoff module (hashable by its flags: a primitive param)."""

    def __init__(self, flags: tuple[str, ...]):
        self.flags = flags
        module = tpuoff.Module(_tpuoff.kernel_module(list(flags)))
        self.name = module.name
        self.proto = module.proto()
        sig = module.signature
        self.num_devices = sig["num_partitions"] if sig["partitioned"] else 1
        # What each axis of the module's mesh shards (--shard=batch,vocab).
        shard = [f.split("=", 1)[1] for f in flags if f.startswith("--shard=")]
        self.axis_kinds = tuple(shard[-1].split(",")) if shard and self.num_devices > 1 else ()

        def port(p):
            if p["dtype"] not in _DTYPES:
                raise NotImplementedError(f"tpuoff.jax: {self.name}: dtype {p['dtype']}")
            return Port(p["name"], _DTYPES[p["dtype"]], tuple(p["shape"]),
                        _split_kinds(p["name"], tuple(p["shape"]), tuple(p["global_shape"])))

        self.inputs = tuple(port(p) for p in sig["parameters"])
        self.outputs = tuple(port(p) for p in sig["outputs"])
        self._bytecode = None

    @property
    def stablehlo(self) -> bytes:
        if self._bytecode is None:
            self._bytecode = jax.extend.mlir.hlo_to_stablehlo(self.proto)
        return self._bytecode

    def __hash__(self):
        return hash(self.flags)

    def __eq__(self, other):
        return isinstance(other, Kernel) and other.flags == self.flags

    def __repr__(self):
        return f"tpuoff:{self.name}"


@functools.lru_cache(maxsize=256)
def kernel(flags: tuple[str, ...]) -> Kernel:
    return Kernel(flags)


tpuoff_call_p = extend_core.Primitive("tpuoff_call")
tpuoff_call_p.multiple_results = True


def call(k: Kernel, args, axes: tuple[str, ...] = ()) -> list:
    """The outputs of kernel `k` on `args` (its parameters, in order). `axes`:
    the mesh axes of the enclosing shard_map the module's device mesh is laid
    over (empty for an unsharded module)."""
    if len(args) != len(k.inputs):
        raise TypeError(f"{k.name} takes {len(k.inputs)} arguments, got {len(args)}")
    checked = []
    for a, p in zip(args, k.inputs):
        a = jnp.asarray(a)
        if a.dtype != p.dtype or tuple(a.shape) != p.shape:
            raise TypeError(f"tpuoff.jax: {k.name}: {p.name} must be {p.dtype}{list(p.shape)}, "
                            f"got {a.dtype}{list(a.shape)}")
        checked.append(a)
    return tpuoff_call_p.bind(*checked, kernel=k, axes=tuple(axes))


def _varying_axes(kernel: Kernel, port: Port, axes) -> set[str]:
    """The JAX axes (of `axes`, the module's mesh axes) over which `port`
    differs: those whose kind splits it."""
    if port.split_kinds is None or len(kernel.axis_kinds) != len(axes):
        return set(axes)
    return {a for a, kind in zip(axes, kernel.axis_kinds) if kind in port.split_kinds}


def _abstract_eval(*avals, kernel: Kernel, axes):
    # Varying manual axes (shard_map's check_vma): an output the module makes
    # identical across the axes of its mesh (all-reduced: the loss; per-token
    # values over the vocab axes) is invariant over those axes; it varies
    # over the axes that split it (and with the inputs over other axes).
    check = jax_config._check_vma.value
    varying = frozenset()
    for a in avals:
        varying |= a.mat.varying
    mesh = mesh_lib.get_abstract_mesh()
    out = []
    for p in kernel.outputs:
        v = (varying - set(axes)) | _varying_axes(kernel, p, axes)
        if mesh.empty:
            out.append(jcore.ShapedArray(p.shape, p.dtype))
            continue
        out.append(jcore.ShapedArray(
            p.shape, p.dtype, sharding=NamedSharding(mesh, PartitionSpec(*[None] * len(p.shape))),
            manual_axis_type=jcore.ManualAxisType(varying=v if check else frozenset())))
    return out


tpuoff_call_p.def_abstract_eval(_abstract_eval)


def _impl(*args, kernel: Kernel, axes):
    # Eager use: compile the primitive alone.
    return jax.jit(lambda *a: tpuoff_call_p.bind(*a, kernel=kernel, axes=axes))(*args)


tpuoff_call_p.def_impl(_impl)

_COLLECTIVES_WITH_GROUPS = ("stablehlo.all_reduce", "stablehlo.all_gather",
                            "stablehlo.reduce_scatter", "stablehlo.all_to_all",
                            "stablehlo.collective_broadcast")


def _mesh_layout(ctx, axes: tuple[str, ...], kernel: Kernel):
    """(mesh axis names, sizes, rows): rows[r][v] is the partition (device
    position in the SPMD program) of virtual device v of the module's mesh,
    for the r-th combination of the other axes' coordinates."""
    axis_ctx = ctx.module_context.axis_context
    mesh = getattr(axis_ctx, "mesh", None)
    if mesh is None:
        raise ValueError(f"tpuoff.jax: {kernel.name} is sharded over {axes} but is not "
                         "inside a jax.shard_map over a mesh with those axes")
    names, sizes = tuple(mesh.axis_names), tuple(mesh.axis_sizes)
    manual = getattr(axis_ctx, "manual_axes", frozenset(names))
    if frozenset(manual) != frozenset(names):
        raise NotImplementedError(
            f"tpuoff.jax: sharded kernels need a shard_map manual over every mesh axis "
            f"{names} (got manual axes {sorted(manual)})")
    for a in axes:
        if a not in names:
            raise NameError(f"tpuoff.jax: unbound axis name {a!r} (mesh axes {names})")
    if math.prod(sizes[names.index(a)] for a in axes) != kernel.num_devices:
        raise ValueError(f"tpuoff.jax: {kernel.name} was built for {kernel.num_devices} "
                         f"devices, axes {axes} span {[sizes[names.index(a)] for a in axes]}")
    order = [names.index(a) for a in axes]
    others = [i for i in range(len(names)) if i not in order]
    iota = np.arange(math.prod(sizes)).reshape(sizes)
    rows = np.transpose(iota, others + order).reshape(-1, kernel.num_devices)
    return names, sizes, rows


def _virtual_partition_id(names, sizes, axes):
    """ui32 index of this device on the module's mesh: the axes' indices
    (partition-id / stride % size, as JAX lowers axis_index), row-major."""
    pid = hlo.partition_id()
    total = None
    for a in axes:
        i = names.index(a)
        stride = mlir.ir_constant(np.array(math.prod(sizes[i + 1:]), np.uint32))
        size = mlir.ir_constant(np.array(sizes[i], np.uint32))
        index = hlo.remainder(hlo.divide(pid, stride), size)
        if total is None:
            total = index
        else:
            total = hlo.add(hlo.multiply(total, size), index)
    return total


def _map_to_mesh(ctx, module: ir.Module, axes: tuple[str, ...], kernel: Kernel):
    """Rewrites the module's mesh-dependent ops for the enclosing mesh and
    drops its parameter/result shardings (the call is inside the manual
    region; the module's own shardings describe its 1-D mesh only)."""
    layout = _mesh_layout(ctx, axes, kernel) if axes else None

    def groups_attr(attr):
        # Each group of the module's devices, once per combination of the
        # other axes' coordinates (what JAX's own axis groups are).
        groups = np.asarray(ir.DenseIntElementsAttr(attr))
        groups = groups.reshape(-1, groups.shape[-1])
        if groups.min(initial=0) < 0 or groups.max(initial=0) >= kernel.num_devices:
            raise NotImplementedError(f"tpuoff.jax: {kernel.name}: replica groups {groups.tolist()} "
                                      f"outside its {kernel.num_devices} devices or uneven")
        mapped = np.stack([row[g] for g in groups for row in layout[2]])
        return ir.DenseIntElementsAttr.get(np.ascontiguousarray(mapped.astype(np.int64)))

    def pairs_attr(attr):
        pairs = np.asarray(ir.DenseIntElementsAttr(attr)).reshape(-1, 2)
        mapped = np.array([[row[s], row[t]] for row in layout[2] for s, t in pairs])
        return ir.DenseIntElementsAttr.get(np.ascontiguousarray(mapped.astype(np.int64)))

    def visit(block):
        for op in list(block.operations):
            name = op.operation.name
            attrs = op.operation.attributes
            if "mhlo.sharding" in attrs:
                del attrs["mhlo.sharding"]
            if name in _COLLECTIVES_WITH_GROUPS or name == "stablehlo.collective_permute":
                if layout is None:
                    raise ValueError(f"tpuoff.jax: {kernel.name} has collectives but no mesh "
                                     "axes were given")
                if "replica_groups" in attrs:
                    attrs["replica_groups"] = groups_attr(attrs["replica_groups"])
                if "source_target_pairs" in attrs:
                    attrs["source_target_pairs"] = pairs_attr(attrs["source_target_pairs"])
                attrs["channel_handle"] = hlo.ChannelHandle.get(
                    mlir.COLLECTIVE_CHANNEL_ID, mlir.DEVICE_TO_DEVICE_TYPE)
            elif name == "stablehlo.partition_id":
                if layout is None:
                    raise ValueError(f"tpuoff.jax: {kernel.name} reads partition-id but no mesh "
                                     "axes were given")
                with ir.InsertionPoint(op), op.location:
                    index = _virtual_partition_id(layout[0], layout[1], axes)
                op.result.replace_all_uses_with(index)
                op.operation.erase()
                continue
            elif name == "stablehlo.replica_id":
                raise NotImplementedError(f"tpuoff.jax: {kernel.name} reads replica-id")
            for region in op.operation.regions:
                for inner in region.blocks:
                    visit(inner)

    for f in module.body.operations:
        for key in ("arg_attrs", "res_attrs"):
            if key in f.operation.attributes:
                del f.operation.attributes[key]
        for region in f.operation.regions:
            for block in region.blocks:
                visit(block)


def _for_platform(k: Kernel, platform: str) -> Kernel:
    """The fused kernel's form for the backend it is lowered for (its
    ``--emit-for``: values are the same, the memory hints differ), unless the
    caller chose one."""
    if ("--kernel=grpo_fused_linear" not in k.flags
            or any(f.startswith("--emit-for=") for f in k.flags)):
        return k
    return kernel(k.flags + ("--emit-for=" + ("tpu" if platform == "tpu" else "cpu"),))


def _lowering(ctx, *args, kernel: Kernel, axes, platform: str = "cpu"):
    kernel = _for_platform(kernel, platform)
    module_ctx = ctx.module_context
    src = ir.Module.parse(kernel.stablehlo, context=module_ctx.context)
    _map_to_mesh(ctx, src, tuple(axes), kernel)
    name = mlir.merge_mlir_modules(module_ctx.module, f"tpuoff_{kernel.name}", src,
                                   dst_symtab=module_ctx.symbol_table)
    result_types = [mlir.aval_to_ir_type(module_ctx, a) for a in ctx.avals_out]
    call_op = func_dialect.CallOp(result_types, ir.FlatSymbolRefAttr.get(name), list(args))
    return list(call_op.results)


mlir.register_lowering(tpuoff_call_p, _lowering)
mlir.register_lowering(tpuoff_call_p, functools.partial(_lowering, platform="tpu"),
                       platform="tpu")

"""tpuoff kernels inside JAX programs (needs the pinned jax, ``pip install .[jax]``).

``grpo_loss``, ``grpo_fused_linear_loss`` and ``entropy`` lower to tpuoff's
emitted HLO, converted to StableHLO and inlined into the caller's program (no
host callback): they work under ``jax.jit``, ``jax.grad`` (a ``custom_vjp``
whose backward is tpuoff's backward kernel) and inside ``jax.shard_map`` with
vocab- or batch-sharded operands, on any backend XLA compiles for.
"""

try:
    import jax as _jax  # noqa: F401
except ImportError as e:  # pragma: no cover
    raise ImportError("tpuoff.jax needs jax: pip install 'tpuoff[jax]' "
                      "(the pinned jax==0.10.2)") from e

from tpuoff.jax._call import Kernel, call, kernel
from tpuoff.jax._losses import entropy, grpo_fused_linear_loss, grpo_loss

__all__ = ["grpo_loss", "grpo_fused_linear_loss", "entropy", "call", "kernel", "Kernel"]

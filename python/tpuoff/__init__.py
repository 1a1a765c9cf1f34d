"""tpuoff: GRPO-loss and entropy kernels as XLA HLO, a host emulator of TPU v6e
devices with per-device HBM accounting, and (``tpuoff.jax``) the kernels inside
JAX programs.

    import tpuoff
    hlo = tpuoff.kernel_hlo("grpo_tiled", mode="fwd_bwd", batch=1, seq=4096,
                            vocab=151936, logits_dtype="bf16")
    tpuoff.memory(hlo)["groups"][0]["peak_bytes"]
    outputs = tpuoff.run(hlo, {"logits": ..., "chosen_ids": ..., ...})
"""

from tpuoff._api import (
    BACKENDS,
    Module,
    kernel_hlo,
    kernel_option_names,
    load,
    memory,
    pjrt_info,
    run,
    signature,
)
from tpuoff._errors import (
    AlreadyExistsError,
    DeadlineExceededError,
    Error,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnimplementedError,
)

__all__ = [
    "BACKENDS", "Module", "kernel_hlo", "kernel_option_names", "load", "memory", "pjrt_info", "run",
    "signature", "Error", "AlreadyExistsError", "DeadlineExceededError",
    "FailedPreconditionError", "InternalError", "InvalidArgumentError", "NotFoundError",
    "OutOfRangeError", "PermissionDeniedError", "ResourceExhaustedError",
    "UnimplementedError",
]
__version__ = "0.1.0"

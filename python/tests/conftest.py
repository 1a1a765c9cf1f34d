"""pytest set-up for the tpuoff package tests: 8 host CPU devices for the
shard_map tests (before JAX starts), and the test vectors."""
import os

_FLAG = "--xla_force_host_platform_device_count=8"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()

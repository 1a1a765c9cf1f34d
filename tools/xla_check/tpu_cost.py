"""XLA:TPU's own cost analysis of tpuoff's modules beside `tpuoff cost`.

Compiles each module (HLO text) for a TPU v6e topology with libtpu, compile
only (no TPU needed: jax.experimental.topologies + the CompileOnlyPyClient),
and prints XLA:TPU's cost_analysis() of the optimised executable (flops,
transcendentals, bytes accessed, optimal_seconds) beside tpuoff's fused
counting and predicted time. XLA counts a while body once; tpuoff multiplies
it by the trip count, so looping modules are not like for like (flagged).
Single-device modules only (per-device SPMD programs would need the manual
sharding path of runtime/pjrt).

libtpu comes from the PJRT plugin venv of issue 17 (tools/pjrt/setup_plugins.sh,
libtpu==0.0.52); jax/jaxlib from the XLA harness venv:

  $(tools/xla_check/setup_venv.sh | tail -1) tools/xla_check/tpu_cost.py \\
      --libtpu-site ~/.cache/tpuoff/pjrt-venv/lib/python3.11/site-packages \\
      --tpuoff build/tools/tpuoff MODULE.hlo...
"""
import argparse
import json
import os
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--libtpu-site", required=True, help="site-packages holding libtpu/")
    ap.add_argument("--tpuoff", required=True)
    ap.add_argument("--topology", default="v6e:1x1")
    ap.add_argument("--json")
    ap.add_argument("modules", nargs="+")
    a = ap.parse_args()
    os.environ["TPU_SKIP_MDS_QUERY"] = "1"  # else libtpu polls the GCE metadata server
    sys.path.append(a.libtpu_site)
    import jax  # noqa: E402
    import jax.extend as jex  # noqa: E402
    from jax.experimental import topologies  # noqa: E402
    from jax._src.interpreters import mlir as jmlir  # noqa: E402
    from jax._src.lib import xla_client as xc  # noqa: E402
    from jax._src.lib.mlir import ir  # noqa: E402

    topo = topologies.get_topology_desc(platform="tpu", topology_name=a.topology)
    device = topo.devices[0]
    client = device.client
    rows = []
    for path in a.modules:
        text = open(path).read()
        module = xc.hlo.hlo_module_from_text(text)
        mlir = jex.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
        with jmlir.make_ir_context():
            exe = client.compile(ir.Module.parse(mlir), xc.DeviceList((device,)),
                                 xc.CompileOptions())
        ca = exe.cost_analysis()
        if isinstance(ca, list):
            ca = ca[0]
        r = subprocess.run([a.tpuoff, "cost", path, "--json"], capture_output=True, text=True,
                           check=True)
        ours = json.loads(r.stdout)
        row = {
            "module": os.path.basename(path),
            "loops": re.search(r"\bwhile\(", text) is not None,
            "device_kind": device.device_kind,
            "xla_tpu": {k: float(ca.get(k, 0.0)) for k in
                        ("flops", "transcendentals", "bytes accessed", "optimal_seconds")},
            "tpuoff": {k: ours[k] for k in
                       ("flops", "transcendentals", "bytes_accessed", "predicted_seconds")},
        }
        rows.append(row)
        x, t = row["xla_tpu"], row["tpuoff"]
        print(f"{row['module']}{' (loops: XLA counts a body once)' if row['loops'] else ''}\n"
              f"  XLA:TPU ({device.device_kind}): bytes {x['bytes accessed'] / 1e9:.3f} GB, "
              f"flops {x['flops']:.4g}, transcendentals {x['transcendentals']:.4g}, "
              f"optimal {x['optimal_seconds'] * 1e3:.3f} ms\n"
              f"  tpuoff fused:   bytes {t['bytes_accessed'] / 1e9:.3f} GB, flops {t['flops']:.4g}, "
              f"transcendentals {t['transcendentals']:.4g}, predicted "
              f"{t['predicted_seconds'] * 1e3:.3f} ms")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

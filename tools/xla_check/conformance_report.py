"""Report of the XLA conformance parts: OUT/<part>.json -> OUT/../xla_conformance.{json,md}.

Written atomically by every part (so a partial run still leaves a readable report) and
by the `report` part, which also fails when a part is missing or failed.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

PARTS = ("forward-none", "forward-batch", "forward-vocab", "testdata", "testdata-v2", "reverse")
# The testdata and reverse parts on a second vector set (ctest: ../shared/testdata when it
# exists); the report requires them only when told (conformance.py --expect).
OPTIONAL_PARTS = ("testdata-shared", "testdata-v2-shared", "reverse-shared")


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_part(out: Path, doc: dict) -> None:
    _atomic_write(out / f"{doc['part']}.json", json.dumps(doc, indent=1) + "\n")


def _fmt(v) -> str:
    return "—" if v is None else str(v)


def _xla_total(x: dict):
    keys = ("argument_bytes", "output_bytes", "temp_bytes")
    if any(x.get(k) is None for k in keys):
        return None
    return sum(x[k] for k in keys) - (x.get("alias_bytes") or 0)


def _memory_rows(cases: list, ratios: list) -> list:
    rows = []
    for c in cases:
        m = c.get("memory", {})
        x, t = m.get("xla"), m.get("tpuoff")
        if not x or not t:
            continue
        total = _xla_total(x)
        ratio = "—"
        if total and t.get("peak_bytes") is not None:
            ratios.append(t["peak_bytes"] / total)
            ratio = f"{ratios[-1]:.2f}"
        run_peak = m.get("tpuoff_run", {}).get("peak_bytes")
        rows.append(f"| {c['id']} | {c.get('devices', 1)} | {_fmt(x.get('argument_bytes'))} | "
                    f"{_fmt(x.get('output_bytes'))} | {_fmt(x.get('alias_bytes'))} | "
                    f"{_fmt(x.get('temp_bytes'))} | {_fmt(x.get('peak_bytes'))} | {_fmt(total)} | "
                    f"{_fmt(t.get('peak_bytes'))} | "
                    f"{_fmt(t.get('argument_bytes'))}/{_fmt(t.get('output_bytes'))}/{_fmt(t.get('temp_bytes'))} | "
                    f"{'=' if run_peak == t.get('peak_bytes') else _fmt(run_peak)} | "
                    f"{_fmt(t.get('tpu_peak_bytes'))} | {ratio} |")
    return rows


def render(parts: dict, missing: list) -> str:
    lines = ["# XLA conformance report", ""]
    any_doc = next(iter(parts.values()), None)
    if any_doc:
        lines.append("Real XLA: " + ", ".join(f"{k} {v}" for k, v in any_doc["versions"].items())
                     + " (tools/xla_check/requirements.txt), CPU backend, 8 CPU devices for "
                       "partitioned modules.")
        lines.append("")
    lines += ["| part | cases | passed | failed | checks | seconds |", "|---|---|---|---|---|---|"]
    for name in PARTS + OPTIONAL_PARTS:
        d = parts.get(name)
        if d is None:
            if name in PARTS or name in missing:
                lines.append(f"| {name} | missing | | | | |")
            continue
        checks = sum(len(c["checks"]) for c in d["cases"])
        lines.append(f"| {name}{' (--only ' + d['only'] + ')' if d.get('only') else ''} | "
                     f"{len(d['cases'])} | {d['passed']} | {d['failed']} | {checks} | {d['seconds']} |")
    lines.append("")
    if missing:
        lines += [f"Missing parts: {', '.join(missing)}", ""]
    failures = [(n, c) for n, d in parts.items() for c in d["cases"] if not c["ok"]]
    if failures:
        lines += ["## Failures", ""]
        for n, c in failures:
            bad = [f"{k['name']}: {k['detail']}" for k in c["checks"] if not k["ok"]]
            lines.append(f"- {n} `{c['id']}`: " + "; ".join(([c["error"]] if c["error"] else []) + bad))
        lines.append("")
    exact = total = 0
    for d in parts.values():
        for c in d["cases"]:
            for k in c["checks"]:
                if k["name"].startswith("tpuoff(XLA's"):
                    total += 1
                    exact += bool(k.get("exact"))
    if total:
        lines += [f"Round trips through XLA (its printed text / serialized proto run by tpuoff): "
                  f"{exact} of {total} bit-identical to tpuoff's own run, all within tolerance "
                  f"unless listed above.", ""]
    math = [k for d in parts.values() for c in d["cases"] for k in c["checks"]
            if k["name"] == "tpuoff vs jax math"]
    if math:
        lines += [f"JAX-written math vs tpuoff (forward-none: grpo_reference, grpo_tiled, "
                  f"grpo_fused_linear fwd_bwd x f32/bf16 x parameter variants): {sum(k['ok'] for k in math)} "
                  f"of {len(math)} within tolerance, max abs diff {max(k['max_abs'] for k in math):.2g}.", ""]
    rev = parts.get("reverse")
    if rev:
        lines += ["## Reverse direction (JAX's HLO on tpuoff)", ""]
        for v, ops in rev.get("opcodes", {}).items():
            lines.append(f"- `{v}` opcodes: " + " ".join(sorted(ops)))
        lines.append(f"- fusion kinds: {' '.join(rev.get('fusion_kinds', [])) or 'none'}; custom-call targets: "
                     f"{' '.join(rev.get('custom_call_targets', [])) or 'none'}")
        for name, why in rev.get("corpus_not_compared", {}).items():
            lines.append(f"- tests/corpus/{name} not compared: {why}")
        lines.append("")
    rows: list = []
    ratios: list = []
    for name in ("forward-none", "forward-batch", "forward-vocab", "testdata", "testdata-shared"):
        if name in parts:
            rows += _memory_rows(parts[name]["cases"], ratios)
    if rows:
        r = sorted(ratios)
        summary = (f"tpuoff peak / XLA footprint over {len(r)} modules: min {r[0]:.2f}, median "
                   f"{r[len(r) // 2]:.2f}, max {r[-1]:.2f}.") if r else ""
        lines += ["## Memory: XLA's compiled memory stats vs tpuoff's simulated peak (bytes, per device)", "",
                  "XLA: `get_compiled_memory_stats()` of the CPU executable: argument/output/alias/temp "
                  "and its reported peak (on CPU this leaves the temp allocation out); footprint = "
                  "argument + output + temp - alias. tpuoff: `tpuoff memory`'s peak and its "
                  "argument/output/temp split at the peak; 'run' is `tpuoff run`'s measured peak ('=' "
                  "when equal); TPU: tpuoff's peak with buffers padded to v6e tiles. ratio = tpuoff peak "
                  "/ XLA footprint. " + summary, "",
                  "| module | devices | XLA arg | XLA out | XLA alias | XLA temp | XLA peak | XLA footprint | "
                  "tpuoff peak | tpuoff arg/out/temp | run | tpuoff TPU peak | ratio |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"] + rows + [""]
    return "\n".join(lines) + "\n"


def finish(out: Path, required=PARTS) -> int:
    """Merge the parts into OUT/../xla_conformance.{json,md}; nonzero when a required part
    is missing or any part failed."""
    parts = {}
    for name in PARTS + OPTIONAL_PARTS:
        f = out / f"{name}.json"
        if f.exists():
            parts[name] = json.loads(f.read_text())
    missing = [p for p in required if p not in parts]
    merged = {"parts": parts, "missing": missing}
    _atomic_write(out.parent / "xla_conformance.json", json.dumps(merged, indent=1) + "\n")
    _atomic_write(out.parent / "xla_conformance.md", render(parts, missing))
    failed = [n for n, d in parts.items() if d["failed"] or not d["passed"]]
    if required:
        print(f"report: {out.parent / 'xla_conformance.md'}")
        for n in PARTS + tuple(p for p in OPTIONAL_PARTS if p in parts or p in required):
            d = parts.get(n)
            print(f"  {n}: " + ("MISSING" if d is None else f"{d['passed']} passed, {d['failed']} failed, "
                                                               f"{d['seconds']}s"))
    return 1 if (missing or failed) and required else 0

"""The GRPO test vectors (tests/testdata/README.md: case.json, inputs,
expected_*.npy): the repository's own tests/testdata; a checkout without it
falls back to ../shared/testdata beside the repository (same layout)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
# case.json parameter names that differ from the kernel keywords.
_RENAME = {"temp_mode": "temperature_mode"}
# Parameters that are run-time inputs of the kernels rather than options.
_AS_INPUT = ("total_valid_tokens", "total_nonempty_rows")


def roots() -> list[tuple[str, Path]]:
    for label, path in (("own", REPO / "tests" / "testdata"),
                        ("shared", REPO.parent / "shared" / "testdata")):
        if path.is_dir():
            return [(label, path)]
    return []


@dataclass
class Case:
    id: str
    path: Path
    dtype: str                      # "f32" | "bf16"
    shape: dict
    options: dict                   # kernel keywords
    inputs: dict                    # name -> float32/int32 numpy (bf16 cases bf16-exact f32)
    expected: dict = field(default_factory=dict)
    atol: float = 0.0
    rtol: float = 0.0

    @property
    def loss_type(self) -> str:
        return self.options.get("loss_type", "token_mean")


def load(path: Path, label: str = "") -> Case:
    c = json.loads((path / "case.json").read_text())
    options, inputs = {}, {}
    for key, value in c.get("params", {}).items():
        if key in _AS_INPUT:
            inputs[key] = np.asarray(value, np.float32)
        else:
            options[_RENAME.get(key, key)] = value
    if c.get("preset"):
        options["preset"] = c["preset"]
    for name, spec in c["inputs"].items():
        inputs[name] = np.load(path / spec["file"])
    expected = {name: np.load(path / spec["file"]) for name, spec in c["expected"].items()}
    kind = path.parent.name
    return Case(f"{label}/{kind}/{path.name}" if label else f"{kind}/{path.name}", path,
                c.get("logits_dtype", "f32"), c["shape"], options, inputs, expected,
                c["tolerance"]["atol"], c["tolerance"]["rtol"])


def cases(*kinds: str) -> list[Case]:
    out = []
    for label, root in roots():
        for kind in kinds:
            for case_json in sorted((root / kind).glob("*/case.json")):
                out.append(load(case_json.parent, label))
    return out


def assert_close(got, want, atol, rtol, what=""):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    err = np.abs(got - want)
    bound = atol + rtol * np.abs(want)
    bad = ~(err <= bound)
    if bad.any():
        i = np.unravel_index(np.argmax(np.where(bad, err - bound, -np.inf)), err.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {err.size} elements beyond atol={atol} rtol={rtol}; "
            f"worst at {i}: got {got[i]!r}, want {want[i]!r}")

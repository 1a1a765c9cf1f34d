"""examples/grpo_ab.py, shortened: the three losses give the same loss curve."""
import importlib.util
import sys

import vectors


def test_grpo_ab_short_run(capsys):
    spec = importlib.util.spec_from_file_location("grpo_ab", vectors.REPO / "examples" / "grpo_ab.py")
    grpo_ab = importlib.util.module_from_spec(spec)
    sys.modules["grpo_ab"] = grpo_ab  # its dataclass looks its module up
    spec.loader.exec_module(grpo_ab)
    summary = grpo_ab.main(["--steps", "3", "--layers", "1"])
    out = capsys.readouterr().out
    assert "tpuoff vs jax: max |loss difference|" in out and "fused vs jax" in out
    results = {r["variant"]: r for r in summary["results"]}
    assert len(results["jax"]["losses"]) == 3
    # The policy moved (the loss changed) and every variant followed the same curve.
    assert abs(results["jax"]["losses"][-1] - results["jax"]["losses"][0]) > 1e-3
    for variant in ("tpuoff", "fused"):
        assert results[variant]["max_rel_diff"] < 1e-4, results[variant]["losses"]
    # The fused head never holds [B,T,V] logits: far less XLA temp memory.
    assert 4 * results["fused"]["head_memory"]["temp"] < results["jax"]["head_memory"]["temp"]

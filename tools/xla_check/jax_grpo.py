#!/usr/bin/env python3
"""GRPO loss + entropy (shared/docs/GRPO_SPEC.md) in plain JAX, value-and-grad w.r.t. logits.

  jax_grpo.py check CASE_DIR...             JAX result vs the case's expected_*.npy
  jax_grpo.py dump CASE_DIR --out DIR       HLO texts (pre/post optimisation), inputs,
                                            JAX outputs for the reverse conformance direction
     [--hlo-pre FILE] [--hlo-post FILE] [--inputs-out DIR] [--outputs-out DIR]
     writes  pre_opt.hlo        jax.jit(f).lower(...).as_text(dialect="hlo"), entry parameters
                                renamed to the spec names + output_names frontend attribute
             pre_opt.raw.hlo    the same, exactly as JAX printed it
             post_opt.hlo       .compile().as_text() (renamed/annotated likewise); .raw as above
             post_opt.nometa.hlo  post_opt re-printed by XLA without metadata/stack frames
             inputs/*.npy       (bf16 logits stored as float32), jax_outputs/*.npy, dump.json
  jax_grpo.py all TESTDATA_GRPO_DIR --out DIR   check + dump every case, print opcode lists

Entry parameter order = spec order: logits, chosen_ids, completion_mask, advantages,
old_logp?, ref_logp?, sampler_logp?, total_valid_tokens?, total_nonempty_rows?.  Outputs
(one tuple, in this order): loss, per_token_loss, logp, entropy, lse, dlogits.  Every
"Policy-loss variants (v2)" option of the spec is written out here as a JAX user writes
it (stop_gradient where the spec says sg, clip/select for the clamps), and
jax.value_and_grad differentiates it: the gradients are JAX's, not derived by hand.

The chosen logit x_y is taken with a one-hot (iota == y) select + reduce rather than
take_along_axis, so the HLO needs no gather/scatter (`--chosen gather` switches).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, asdict
from pathlib import Path
from typing import Optional

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import xla_run  # noqa: E402

OUTPUT_NAMES = ["loss", "per_token_loss", "logp", "entropy", "lse", "dlogits"]
POST_OPT_COMPILER_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}  # empty list: no YNN fusions
INPUT_ORDER = ["logits", "chosen_ids", "completion_mask", "advantages", "old_logp", "ref_logp",
               "sampler_logp", "total_valid_tokens", "total_nonempty_rows"]


@dataclass
class GrpoParams:
    eps_low: float = 0.2
    eps_high: float = 0.2
    temperature: float = 1.0
    temp_mode: str = "pre_softmax"  # pre_softmax | post_lse
    beta: float = 0.0
    delta: Optional[float] = None
    loss_type: str = "token_mean"  # token_mean | sequence_mean | constant
    max_len: Optional[int] = None  # for constant; default T
    total_valid_tokens: Optional[float] = None  # not None => passed as a runtime input
    on_policy: bool = False
    logits_dtype: str = "f32"  # f32 | bf16
    # Policy-loss variants (v2)
    policy_loss: str = "ppo_clip"  # ppo_clip | gspo | gspo_token | cispo | sapo
    kl_estimator: str = "k3"  # k3 | k1 | k2 | low_var_kl
    log_ratio_clamp: Optional[float] = None
    advantage_shape: str = "sequence"  # sequence | token
    entropy_coef: float = 0.0
    empty_rows: str = "count"  # count | skip
    sapo_tau_pos: float = 1.0
    sapo_tau_neg: float = 1.05
    is_level: str = "none"  # none | token | sequence
    is_mode: str = "truncate"  # truncate | mask
    is_cap: float = 2.0
    total_nonempty_rows: Optional[float] = None  # not None => passed as a runtime input

    def input_names(self) -> list:
        names = ["logits", "chosen_ids", "completion_mask", "advantages"]
        if not self.on_policy:
            names.append("old_logp")
        if self.beta != 0:
            names.append("ref_logp")
        if self.is_level != "none":
            names.append("sampler_logp")
        if self.total_valid_tokens is not None:
            names.append("total_valid_tokens")
        if self.total_nonempty_rows is not None:
            names.append("total_nonempty_rows")
        return names


def params_from_case(case: dict) -> GrpoParams:
    p = dict(case.get("params", {}))
    known = set(GrpoParams.__dataclass_fields__)
    bad = set(p) - known
    if bad:
        raise ValueError(f"unknown case params {sorted(bad)}")
    gp = GrpoParams(**p)
    gp.on_policy = bool(case.get("on_policy", False))
    gp.logits_dtype = case.get("logits_dtype", "f32")
    if gp.temp_mode not in ("pre_softmax", "post_lse"):
        raise ValueError(f"temp_mode {gp.temp_mode}")
    if gp.loss_type not in ("token_mean", "sequence_mean", "constant"):
        raise ValueError(f"loss_type {gp.loss_type}")
    return gp


def make_loss_fn(gp: GrpoParams, chosen: str = "onehot"):
    """Return loss_fn(*inputs in INPUT_ORDER) -> (loss, (ptl, logp, entropy, lse)); unused
    inputs may be None."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    f32 = jnp.float32
    tau = float(gp.temperature)

    def stable_lse(x):
        mu = lax.stop_gradient(jnp.max(x, axis=-1, keepdims=True))
        s = jnp.sum(jnp.exp(x - mu), axis=-1)
        return mu[..., 0] + jnp.log(s)

    def chosen_of(x, y):
        if chosen == "gather":
            return jnp.take_along_axis(x, y[..., None], axis=-1)[..., 0]
        onehot = lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1) == y[..., None]
        return jnp.sum(lax.select(onehot, x, jnp.zeros_like(x)), axis=-1)

    def clip(v, lo, hi):
        return jnp.minimum(jnp.maximum(v, lo), hi)

    def loss_fn(logits, chosen_ids, completion_mask, advantages, old_logp, ref_logp, sampler_logp,
                total_valid_tokens, total_nonempty_rows):
        z = logits.astype(f32)
        B, T = z.shape[0], z.shape[1]
        x = z / tau if gp.temp_mode == "pre_softmax" else z
        lse = stable_lse(x)
        logp = chosen_of(x, chosen_ids) - lse
        if gp.temp_mode == "post_lse":
            logp = logp / tau
        # entropy of softmax(z/tau) (both modes); a metric unless entropy_coef != 0
        # (centred on the row max: lse(zt) - sum p*zt cancels badly in f32 for large logits)
        zt = z / tau
        zc = zt - lax.stop_gradient(jnp.max(zt, axis=-1, keepdims=True))
        log_s = jnp.log(jnp.sum(jnp.exp(zc), axis=-1))
        p = jnp.exp(zc - log_s[..., None])
        entropy = log_s - jnp.sum(p * zc, axis=-1)
        if gp.entropy_coef == 0:
            entropy = lax.stop_gradient(entropy)
        m = completion_mask.astype(f32)
        on = m != 0
        old = lax.stop_gradient(logp) if gp.on_policy else old_logp
        A = advantages.astype(f32)
        if gp.advantage_shape == "sequence":
            A = A[:, None]
        A = jnp.broadcast_to(A, (B, T))
        lr = logp - old
        if gp.log_ratio_clamp is not None:
            lr = jnp.clip(lr, -gp.log_ratio_clamp, gp.log_ratio_clamp)  # no gradient where clamped
        lo, hi = 1.0 - gp.eps_low, 1.0 + gp.eps_high

        def clipped_surrogate(r, r_upper):
            # -min(r_upper*A, clip(r)*A); ties -> unclipped branch; the clipped one carries no gradient
            r_clip = lax.stop_gradient(clip(r, lo, hi))
            take_unclipped = lax.stop_gradient(A * r_clip >= A * r_upper)
            return lax.select(take_unclipped, -(A * r_upper), -(A * r_clip))

        if gp.policy_loss == "ppo_clip":
            r = jnp.exp(lr)
            if gp.delta is not None:
                d_c = jnp.asarray(gp.delta, f32)
                r_d = lax.select(r <= d_c, r, jnp.broadcast_to(d_c, r.shape))  # min(r, delta); grad 1[r<=delta]
            else:
                r_d = r
            sur = clipped_surrogate(r, r_d)
        elif gp.policy_loss in ("gspo", "gspo_token"):
            n_row = jnp.maximum(jnp.sum(m, axis=1, keepdims=True), 1.0)
            mean = jnp.sum(jnp.where(on, m * lr, 0.0), axis=1, keepdims=True) / n_row
            if gp.policy_loss == "gspo":
                log_s = jnp.broadcast_to(mean, (B, T))
            else:  # sg(row mean) + logp - sg(logp), through the clamp
                log_s = lax.stop_gradient(mean) + lr - lax.stop_gradient(lr)
            s = jnp.exp(log_s)
            sur = clipped_surrogate(s, s)
        elif gp.policy_loss == "cispo":
            w_c = lax.stop_gradient(clip(jnp.exp(lr), lo, hi))
            sur = -w_c * A * logp
        elif gp.policy_loss == "sapo":
            r = jnp.exp(lr)
            tau_s = jnp.where(A > 0, gp.sapo_tau_pos, gp.sapo_tau_neg).astype(f32)
            sur = -(4.0 / tau_s) * jax.nn.sigmoid(tau_s * (r - 1.0)) * A
        else:
            raise ValueError(f"policy_loss {gp.policy_loss}")
        if gp.is_level != "none":
            old_v = lax.stop_gradient(logp) if gp.on_policy else old_logp
            lw = old_v - sampler_logp
            if gp.is_level == "sequence":
                lw = jnp.broadcast_to(jnp.sum(jnp.where(on, m * lw, 0.0), axis=1, keepdims=True), (B, T))
            w = jnp.exp(lw)
            w = jnp.minimum(w, gp.is_cap) if gp.is_mode == "truncate" else jnp.where(w <= gp.is_cap, w, 0.0)
            sur = lax.stop_gradient(w) * sur
        ptl = sur
        if gp.beta != 0:
            d = ref_logp - logp
            if gp.kl_estimator == "k3":
                k = jnp.exp(d) - d - 1.0
            elif gp.kl_estimator == "k1":
                k = -d
            elif gp.kl_estimator == "k2":
                k = 0.5 * d * d
            else:  # low_var_kl
                dc = jnp.clip(d, -20.0, 20.0)
                k = jnp.clip(jnp.exp(dc) - dc - 1.0, -10.0, 10.0)
            ptl = ptl + gp.beta * k
        if gp.entropy_coef != 0:
            ptl = ptl - gp.entropy_coef * entropy
        if gp.loss_type == "token_mean":
            N = total_valid_tokens.astype(f32) if gp.total_valid_tokens is not None else jnp.sum(m)
            g = m / jnp.maximum(N, 1.0)
        elif gp.loss_type == "sequence_mean":
            if gp.empty_rows == "count":
                rows = float(B)
            elif gp.total_nonempty_rows is not None:
                rows = jnp.maximum(total_nonempty_rows.astype(f32), 1.0)
            else:
                rows = jnp.maximum(jnp.sum((jnp.sum(m, axis=1) > 0).astype(f32)), 1.0)
            g = m / jnp.maximum(jnp.sum(m, axis=1, keepdims=True), 1.0) / rows
        else:
            max_len = gp.max_len if gp.max_len is not None else T
            g = m / float(B * max_len)
        loss = jnp.sum(jnp.where(g != 0, g * ptl, 0.0))  # masked tokens contribute nothing
        aux = (ptl, lax.stop_gradient(logp), lax.stop_gradient(entropy), lax.stop_gradient(lse))
        return loss, aux

    return loss_fn


def make_value_and_grad(gp: GrpoParams, chosen: str = "onehot"):
    """Return f(*inputs in gp.input_names() order) -> (loss, ptl, logp, entropy, lse, dlogits)."""
    import jax

    names = gp.input_names()
    vg = jax.value_and_grad(make_loss_fn(gp, chosen), argnums=0, has_aux=True)

    def f(*args):
        if len(args) != len(names):
            raise TypeError(f"expected {names}")
        kw = dict(zip(names, args))
        full = [kw.get(n) for n in INPUT_ORDER]
        (loss, (ptl, logp, ent, lse)), dlogits = vg(*full)
        return loss, ptl, logp, ent, lse, dlogits

    f.__name__ = "grpo_value_and_grad"
    return f


FUSED_OUTPUT_NAMES = OUTPUT_NAMES[:-1] + ["d_hidden", "d_lm_head"]


def fused_input_names(gp: GrpoParams) -> list:
    return ["hidden", "lm_head"] + gp.input_names()[1:]


def make_fused_value_and_grad(gp: GrpoParams, chosen: str = "onehot"):
    """The unfused math of grpo_fused_linear, as a JAX user writes it: logits = hidden @ lm_head
    (f32 accumulation, the [B,T,V] logits materialised), then the GRPO loss; gradients with
    respect to hidden and lm_head. f(*inputs in fused_input_names(gp) order) ->
    (loss, ptl, logp, entropy, lse, d_hidden, d_lm_head)."""
    import jax
    import jax.numpy as jnp

    loss_fn = make_loss_fn(gp, chosen)
    names = fused_input_names(gp)

    def fused_loss(hidden, lm_head, *rest):
        logits = jnp.einsum("bth,hv->btv", hidden, lm_head, preferred_element_type=jnp.float32)
        return loss_fn(logits, *rest)

    vg = jax.value_and_grad(fused_loss, argnums=(0, 1), has_aux=True)

    def f(*args):
        if len(args) != len(names):
            raise TypeError(f"expected {names}")
        kw = dict(zip(names, args))
        rest = [kw.get(n) for n in INPUT_ORDER[1:]]
        (loss, (ptl, logp, ent, lse)), (dh, dw) = vg(kw["hidden"], kw["lm_head"], *rest)
        return loss, ptl, logp, ent, lse, dh, dw

    f.__name__ = "grpo_fused_value_and_grad"
    return f


def load_case(case_dir: Path):
    case = json.loads((case_dir / "case.json").read_text())
    gp = params_from_case(case)
    import jax.numpy as jnp
    arrays = []
    for n in gp.input_names():
        if n not in case["inputs"]:
            raise ValueError(f"{case_dir}: case.json lacks input {n}")
        a = np.load(case_dir / case["inputs"][n]["file"])
        if n == "logits":
            a = a.astype(jnp.bfloat16) if gp.logits_dtype == "bf16" else a.astype(np.float32)
            if gp.logits_dtype == "bf16" and not np.array_equal(a.astype(np.float32), np.load(
                    case_dir / case["inputs"][n]["file"])):
                raise ValueError(f"{case_dir}: bf16 case logits are not bf16-exact")
        elif n == "chosen_ids":
            a = a.astype(np.int32)
        else:
            a = a.astype(np.float32)
        arrays.append(a)
    extra = set(case["inputs"]) - set(gp.input_names())
    if extra:
        raise ValueError(f"{case_dir}: inputs {sorted(extra)} not used by params {gp}")
    return case, gp, arrays


def run_jax(gp: GrpoParams, arrays, chosen="onehot"):
    import jax
    f = jax.jit(make_value_and_grad(gp, chosen))
    outs = f(*arrays)
    return f, [np.asarray(o) for o in outs]


def check_case(case_dir: Path, chosen="onehot", out=sys.stdout) -> bool:
    case, gp, arrays = load_case(case_dir)
    _, outs = run_jax(gp, arrays, chosen)
    tol = case["tolerance"]
    ok = True
    msgs = []
    for n, o in zip(OUTPUT_NAMES, outs):
        e = np.load(case_dir / case["expected"][n]["file"])
        r = xla_run.compare_arrays(o.astype(np.float32), e, tol["atol"], tol["rtol"])
        ok &= r["ok"]
        msgs.append(f"{n}:{'ok' if r['ok'] else 'FAIL'}(abs {r.get('max_abs', float('nan')):.1e})")
    print(f"{'PASS' if ok else 'FAIL'} {case_dir.name}: " + " ".join(msgs), file=out)
    return ok


def _rename_and_annotate(text: str, names: list) -> str:
    """Give entry parameters the spec names and add output_names; validated by XLA re-parse."""
    s, e, lines = xla_run.entry_block(text)
    pnames = {}
    for ln in lines[s + 1:e]:
        m = xla_run._INSTR_RE.match(ln)
        if m:
            pm = xla_run._PARAM_AT_OPCODE_RE.match(m.group(3))
            if pm:
                pnames[int(pm.group(1))] = m.group(2)
    body = "\n".join(lines)
    for i, new in enumerate(names):
        old = pnames.get(i)
        if old is None or old == new:
            continue
        tok = r"(?<![\w.\-%])(%?)" + re.escape(old) + r"(?![\w.\-])"
        if re.search(r"(?<![\w.\-%])%?" + re.escape(new) + r"(?![\w.\-])", body):
            raise ValueError(f"cannot rename {old} -> {new}: name in use")
        # rename only inside the ENTRY computation (names are module-unique in XLA output)
        s, e, lines = xla_run.entry_block(body)
        blk = [re.sub(tok, lambda m: m.group(1) + new, ln) for ln in lines[s:e + 1]]
        lines[s:e + 1] = blk
        body = "\n".join(lines)
    hdr = xla_run.header_line(body)
    if "output_names" not in hdr:
        attr = f'output_names="{",".join(OUTPUT_NAMES)}"'
        fa = xla_run.find_attr(hdr, "frontend_attributes")
        if fa:
            new_hdr = hdr[:fa[1] - 1] + ("," if fa[2] != "{}" else "") + attr + "}" + hdr[fa[1]:]
        else:
            new_hdr = hdr + ", frontend_attributes={" + attr + "}"
        body = body.replace(hdr, new_hdr, 1)
    return body + ("\n" if not body.endswith("\n") else "")


def dump_case(case_dir: Path, hlo_pre: Path, hlo_post: Path, inputs_out: Path, outputs_out: Path,
              chosen="onehot", post_default: Optional[Path] = None) -> dict:
    """post_default: also write the module XLA:CPU optimises with its default options
    (YNNPACK fusions kind=kCustom "__ynn_fusion" included), renamed and annotated."""
    import jax
    case, gp, arrays = load_case(case_dir)
    f = jax.jit(make_value_and_grad(gp, chosen))
    lowered = f.lower(*arrays)
    pre_raw = lowered.as_text(dialect="hlo")
    # The CPU compiler otherwise wraps big reductions into backend-specific YNNPACK
    # fusions (kind=kCustom, backend_config "__ynn_fusion") that are neither portable
    # nor re-compilable after an HLO->StableHLO round trip.  Keep post-opt HLO generic.
    compiled = lowered.compile(compiler_options=dict(POST_OPT_COMPILER_OPTIONS))
    post_raw = compiled.as_text()
    names = gp.input_names()
    xc = xla_run._xc()
    pre = _rename_and_annotate(pre_raw, names)
    post = _rename_and_annotate(post_raw, names)
    if post_default is not None:
        post_default.parent.mkdir(parents=True, exist_ok=True)
        post_default.write_text(_rename_and_annotate(lowered.compile().as_text(), names))
    parsed = {}
    for t, what in ((pre, "pre"), (post, "post")):
        m = xc.hlo.hlo_module_from_text(t)  # must round-trip through XLA's parser
        parsed[what] = m
        info = xla_run.module_info(m)
        got = [p.name for p in info.params]
        if got != names:
            raise RuntimeError(f"{what}-opt dump parameters {got} != {names}")
    for path, t, raw in ((hlo_pre, pre, pre_raw), (hlo_post, post, post_raw)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(t)
        path.with_suffix(".raw" + path.suffix).write_text(raw)
    # the same optimised module printed by XLA without metadata / stack-frame tables
    hlo_post.with_suffix(".nometa" + hlo_post.suffix).write_text(xla_run.module_text(parsed["post"], metadata=False))
    inputs_out.mkdir(parents=True, exist_ok=True)
    outputs_out.mkdir(parents=True, exist_ok=True)
    for n, a in zip(names, arrays):
        np.save(inputs_out / f"{n}.npy", a.astype(np.float32) if a.dtype.name == "bfloat16" else a)
    outs = [np.asarray(o) for o in compiled(*arrays)]
    for n, o in zip(OUTPUT_NAMES, outs):
        xla_run.save_output(outputs_out / f"{n}.npy", o)
    meta = {"case": case_dir.name, "params": asdict(gp), "inputs": names, "outputs": OUTPUT_NAMES,
            "tolerance": case["tolerance"], "chosen": chosen, "jax_version": jax.__version__,
            "logits_dtype_note": "bf16 logits are stored as float32 .npy; the HLO parameter is bf16"}
    (outputs_out.parent / "dump.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def opcode_set(path: Path) -> set:
    mod, _ = xla_run.load_module(path, "text")
    return set(xla_run.opcodes_of_module(mod))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chosen", choices=["onehot", "gather"], default="onehot")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("cases", nargs="+")
    d = sub.add_parser("dump")
    d.add_argument("case")
    d.add_argument("--out", help="default layout: OUT/{pre_opt.hlo,post_opt.hlo,inputs/,jax_outputs/}")
    d.add_argument("--hlo-pre")
    d.add_argument("--hlo-post")
    d.add_argument("--inputs-out")
    d.add_argument("--outputs-out")
    a_ = sub.add_parser("all")
    a_.add_argument("testdata", help="e.g. tests/testdata/grpo")
    a_.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    xla_run.ensure_cpu_devices(1)

    def dump_one(case: Path, out: Optional[Path], pre=None, post=None, ins=None, outs=None):
        if out is None and not all((pre, post, ins, outs)):
            raise SystemExit("dump: give --out or all of --hlo-pre/--hlo-post/--inputs-out/--outputs-out")
        pre = Path(pre) if pre else out / "pre_opt.hlo"
        post = Path(post) if post else out / "post_opt.hlo"
        ins = Path(ins) if ins else out / "inputs"
        outs = Path(outs) if outs else out / "jax_outputs"
        dump_case(case, pre, post, ins, outs, a.chosen)
        return pre, post

    if a.cmd == "check":
        ok = all([check_case(Path(cd), a.chosen) for cd in a.cases])
        return 0 if ok else 1
    if a.cmd == "dump":
        dump_one(Path(a.case), Path(a.out) if a.out else None, a.hlo_pre, a.hlo_post, a.inputs_out,
                 a.outputs_out)
        return 0
    cases = sorted(p.parent for p in Path(a.testdata).glob("*/case.json"))
    if not cases:
        print(f"no cases under {a.testdata}", file=sys.stderr)
        return 1
    ok = True
    pre_ops: set = set()
    post_ops: set = set()
    for cd in cases:
        ok &= check_case(cd, a.chosen)
        pre, post = dump_one(cd, Path(a.out) / cd.name)
        pre_ops |= opcode_set(pre)
        post_ops |= opcode_set(post)
    print("pre-optimisation opcodes: " + " ".join(sorted(pre_ops)))
    print("post-optimisation opcodes: " + " ".join(sorted(post_ops)))
    (Path(a.out) / "opcodes.json").write_text(json.dumps(
        {"pre_opt": sorted(pre_ops), "post_opt": sorted(post_ops)}, indent=1) + "\n")
    print(f"{len(cases)} cases dumped; JAX check {'passed' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

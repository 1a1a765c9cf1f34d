"""The project's test-vector cases (tests/testdata/), one Recipe each, by folder.

grpo/ and grpo_fused/ use only the parameters of GRPO_SPEC.md's first part (what the
kernels take today); grpo_v2/ and grpo_fused_v2/ cover every "Policy-loss variants (v2)"
option.  Shapes are small but ragged: vocabularies that are not multiples of the tile or
shard widths (V = 2*2048 + 3, 2049, 2053, primes), T = 1, odd B; bf16 cases in every
folder.  `expect` names effects the draw must exercise (grpo_ref.policy_terms' diag; positive and
negative advantages always).
Changing anything here changes the vectors: rerun gen_vectors.py and commit the result.
"""
from __future__ import annotations

from make_inputs import Recipe

GRPO, GRPO_FUSED, GRPO_V2, GRPO_FUSED_V2 = "grpo", "grpo_fused", "grpo_v2", "grpo_fused_v2"
FOLDERS = (GRPO, GRPO_FUSED, GRPO_V2, GRPO_FUSED_V2)

# GRPO_SPEC.md tolerances (fused: a matmul inside the kernel).
TOLERANCE = {("grpo", "f32"): (1e-5, 1e-4), ("grpo", "bf16"): (2e-3, 2e-2),
             ("fused", "f32"): (1e-4, 1e-3), ("fused", "bf16"): (1e-2, 5e-2)}


def _r(name, seed, B, T, V, **kw) -> Recipe:
    # Every case has unmasked tokens with positive and with negative advantages.
    kw["expect"] = tuple(dict.fromkeys(("a_pos", "a_neg") + tuple(kw.get("expect", ()))))
    return Recipe(name=name, seed=seed, B=B, T=T, V=V, **kw)


def grpo_cases() -> list:
    return [
        _r("tiny_onpolicy", 101, 2, 3, 15, on_policy=True, notes="smallest case, on-policy (ratio 1)"),
        _r("tiny_offpolicy", 102, 2, 3, 15, params={"eps_low": 0.2, "eps_high": 0.3},
           notes="asymmetric clip range"),
        _r("odd_vocab_tail", 103, 2, 5, 37, expect=("pg_live", "pg_dead"),
           notes="V=37: ragged tiles and shards; clipped and unclipped tokens"),
        _r("medium_vocab", 104, 2, 8, 4099, expect=("pg_live", "pg_dead"),
           notes="V=2*2048+3: two full default tiles and a 3-wide tail"),
        _r("vocab_one_full_tile", 105, 2, 4, 2048, params={"eps_low": 0.15, "eps_high": 0.25},
           notes="V=2048: exactly one default tile, no tail"),
        _r("single_token_rows", 106, 5, 1, 2049, on_policy=True, params={"beta": 0.1},
           notes="T=1, odd B=5, V=2049: a 1-wide tail tile; on-policy with the k3 KL"),
        _r("bf16_logits", 107, 2, 16, 300, dtype="bf16", params={"eps_low": 0.2, "eps_high": 0.3},
           expect=("pg_live", "pg_dead"), notes="bf16 logits"),
        _r("bf16_post_lse_onpolicy_seqmean", 108, 3, 5, 515, dtype="bf16", on_policy=True, empty_rows=(1,),
           params={"temperature": 1.3, "temp_mode": "post_lse", "beta": 0.05, "loss_type": "sequence_mean"},
           notes="bf16, post_lse temperature, on-policy, KL, sequence_mean with an empty row"),
        _r("bf16_token_count_delta", 109, 2, 6, 2500, dtype="bf16", ratio_spread=0.5,
           params={"temperature": 0.8, "eps_low": 0.1, "eps_high": 0.28, "delta": 1.5, "beta": 0.04,
                   "total_valid_tokens": 1.0}, count_extra=5.0, expect=("delta_active",),
           notes="bf16, pre_softmax temperature, delta clamp active, KL, run-time token count"),
        _r("temperature_pre_softmax", 110, 3, 4, 64, params={"temperature": 0.7}),
        _r("temperature_post_lse", 111, 3, 4, 64, params={"temperature": 0.7, "temp_mode": "post_lse"}),
        _r("kl_beta", 112, 2, 6, 50, params={"beta": 0.04}, ref_spread=0.4),
        _r("delta_clamp", 113, 2, 6, 50, ratio_spread=0.5, params={"delta": 1.2, "eps_high": 0.28},
           expect=("delta_active", "pg_live")),
        _r("sequence_mean", 114, 4, 7, 40, empty_rows=(2,), params={"loss_type": "sequence_mean"},
           notes="one empty row (counted in B)"),
        _r("constant_norm", 115, 4, 7, 40, prefix_mask=True, params={"loss_type": "constant", "max_len": 16},
           notes="prefix completion masks"),
        _r("global_token_count", 116, 2, 8, 33, params={"total_valid_tokens": 1.0}, count_extra=24.0,
           notes="total_valid_tokens input larger than the local mask sum"),
        # Logits stay within ~15 of each other: beyond that the spec's entropy formula in float32
        # (lse - sum p*x, as the JAX-written math of tools/xla_check evaluates it) errs by more
        # than the 1e-5 tolerance (logits ~55: 5e-5).
        _r("peaked_softmax", 117, 2, 6, 257, logit_scale=1.5, peak=12.0, ratio_spread=0.05,
           notes="softmax concentrated on one column (logp near 0, entropy down to ~0.005)"),
        _r("prefix_mask_tight_clip", 118, 3, 9, 100, prefix_mask=True, ratio_spread=0.3,
           params={"eps_low": 0.1, "eps_high": 0.1}, expect=("pg_live", "pg_dead")),
    ]


def fused_cases() -> list:
    return [
        _r("fused_small", 201, 2, 5, 37, H=16),
        _r("fused_bf16", 202, 2, 16, 2100, H=32, dtype="bf16", params={"eps_high": 0.3},
           notes="bf16 hidden and lm_head; V=2100 = 2048 + 52"),
        _r("fused_temperature", 203, 2, 8, 300, H=32, params={"temperature": 0.7}),
        _r("fused_post_lse_onpolicy_seqmean", 204, 3, 6, 1030, H=24, on_policy=True, empty_rows=(2,),
           params={"temperature": 1.2, "temp_mode": "post_lse", "beta": 0.05, "loss_type": "sequence_mean"}),
        _r("fused_token_count_delta", 205, 2, 7, 2049, H=16, ratio_spread=0.5,
           params={"delta": 1.3, "eps_high": 0.25, "total_valid_tokens": 1.0}, expect=("delta_active",)),
    ]


def v2_cases() -> list:
    defaults = {"policy_loss": "ppo_clip", "kl_estimator": "k3", "advantage_shape": "sequence",
                "entropy_coef": 0.0, "empty_rows": "count", "is_level": "none", "is_mode": "truncate",
                "is_cap": 2.0, "sapo_tau_pos": 1.0, "sapo_tau_neg": 1.05}
    return [
        _r("ppo_clip_explicit_defaults", 301, 3, 8, 300, empty_rows=(1,),
           params=dict(defaults, beta=0.04, loss_type="sequence_mean"), expect=("pg_live", "pg_dead"),
           notes="every v2 key at its default: the v1 loss"),
        _r("ppo_log_ratio_clamp_delta", 302, 3, 12, 700, ratio_spread=0.5,
           params={"policy_loss": "ppo_clip", "log_ratio_clamp": 0.3, "delta": 1.25, "eps_high": 0.28},
           expect=("clamped", "delta_active")),
        _r("token_advantages_zero_ppo", 303, 3, 8, 260, token_adv_zero=0.25, params={"advantage_shape": "token"},
           notes="per-token advantages, a quarter exactly zero"),
        _r("gspo_sequence_mean", 304, 4, 10, 512, ratio_spread=0.3,
           params={"policy_loss": "gspo", "loss_type": "sequence_mean"}, expect=("gspo_rows_in", "gspo_rows_out")),
        _r("gspo_token_mean_token_adv", 305, 3, 12, 640, ratio_spread=0.3,
           params={"policy_loss": "gspo", "advantage_shape": "token", "eps_low": 0.25, "eps_high": 0.3},
           expect=("gspo_rows_in", "gspo_rows_out")),
        _r("gspo_onpolicy_constant_k1", 306, 2, 9, 333, on_policy=True,
           params={"policy_loss": "gspo", "beta": 0.05, "kl_estimator": "k1", "loss_type": "constant",
                   "max_len": 12}),
        _r("gspo_log_ratio_clamp", 307, 4, 8, 420, ratio_spread=0.45,
           params={"policy_loss": "gspo", "log_ratio_clamp": 0.25, "loss_type": "sequence_mean"},
           expect=("clamped", "gspo_rows_in", "gspo_rows_out")),
        _r("gspo_token_is_token", 308, 3, 14, 500, ratio_spread=0.3,
           params={"policy_loss": "gspo_token", "advantage_shape": "token", "is_level": "token",
                   "is_mode": "truncate", "is_cap": 1.6, "loss_type": "sequence_mean"},
           expect=("gspo_rows_in", "gspo_rows_out", "is_over", "is_under")),
        _r("gspo_token_clamp_empty_skip", 309, 4, 8, 390, ratio_spread=0.4, empty_rows=(3,),
           params={"policy_loss": "gspo_token", "log_ratio_clamp": 0.3, "loss_type": "sequence_mean",
                   "empty_rows": "skip"}, expect=("clamped",)),
        _r("bf16_gspo_token_combo", 310, 2, 16, 1100, dtype="bf16", ratio_spread=0.3,
           params={"policy_loss": "gspo_token", "advantage_shape": "token", "beta": 0.05, "kl_estimator": "k2",
                   "entropy_coef": 0.02, "eps_high": 0.28, "is_level": "sequence", "is_mode": "mask",
                   "is_cap": 2.0}, expect=("is_over", "is_under")),
        _r("cispo_is_token_mask", 311, 3, 10, 700, ratio_spread=0.4,
           params={"policy_loss": "cispo", "is_level": "token", "is_mode": "mask", "is_cap": 1.8},
           expect=("cispo_trunc", "is_over", "is_under")),
        _r("cispo_upper_only_clamp", 312, 2, 10, 2053, ratio_spread=0.5,
           params={"policy_loss": "cispo", "eps_low": 1.0, "eps_high": 0.28, "log_ratio_clamp": 0.6},
           expect=("cispo_trunc", "clamped"), notes="TRL's epsilon_high-only CISPO; V=2053 = 2048 + 5"),
        _r("cispo_lowvar_token_count", 313, 3, 8, 450, ratio_spread=0.4, lowvar_extremes=True,
           params={"policy_loss": "cispo", "beta": 0.1, "kl_estimator": "low_var_kl", "total_valid_tokens": 1.0},
           expect=("cispo_trunc", "lowvar_dclip", "lowvar_kclip")),
        _r("sapo_default_tau_global_count", 314, 4, 8, 600, params={"policy_loss": "sapo", "total_valid_tokens": 1.0},
           count_extra=22.0, expect=("a_pos", "a_neg")),
        _r("sapo_tau_token_adv_post_lse", 315, 2, 12, 800, ratio_spread=0.5,
           params={"policy_loss": "sapo", "advantage_shape": "token", "log_ratio_clamp": 0.4, "sapo_tau_pos": 0.8,
                   "sapo_tau_neg": 1.3, "temperature": 0.8, "temp_mode": "post_lse"},
           expect=("clamped", "a_pos", "a_neg")),
        _r("sapo_bf16_kl_seqmean", 316, 3, 8, 700, dtype="bf16",
           params={"policy_loss": "sapo", "beta": 0.05, "loss_type": "sequence_mean"}),
        _r("is_sequence_truncate", 317, 4, 10, 500, is_spread=0.8,
           params={"is_level": "sequence", "is_mode": "truncate", "is_cap": 3.0}, expect=("is_over", "is_under")),
        _r("is_sequence_mask_onpolicy_sapo", 318, 3, 9, 450, on_policy=True, is_spread=0.8,
           params={"policy_loss": "sapo", "is_level": "sequence", "is_mode": "mask"},
           expect=("is_over", "is_under")),
        _r("is_token_truncate_onpolicy_ppo", 319, 3, 8, 350, on_policy=True,
           params={"is_level": "token", "is_mode": "truncate", "is_cap": 1.4}, expect=("is_over", "is_under")),
        _r("kl_k2_temperature", 320, 3, 8, 600, ref_spread=0.4,
           params={"beta": 0.05, "kl_estimator": "k2", "temperature": 0.7}),
        _r("kl_low_var_kl", 321, 2, 10, 1187, lowvar_extremes=True,
           params={"beta": 0.2, "kl_estimator": "low_var_kl"}, expect=("lowvar_dclip", "lowvar_kclip")),
        _r("kl_k1_post_lse_delta", 322, 2, 10, 300, ratio_spread=0.5, ref_spread=0.4,
           params={"beta": 0.1, "kl_estimator": "k1", "temperature": 1.1, "temp_mode": "post_lse", "delta": 1.4},
           expect=("delta_active",)),
        _r("entropy_pre_softmax", 323, 2, 8, 1500, params={"entropy_coef": 0.01, "temperature": 0.7}),
        _r("entropy_post_lse_onpolicy", 324, 3, 8, 1024, on_policy=True,
           params={"entropy_coef": 0.05, "temperature": 1.3, "temp_mode": "post_lse"}),
        _r("entropy_negative_coef_gspo", 325, 3, 8, 400, ratio_spread=0.3,
           params={"entropy_coef": -0.02, "policy_loss": "gspo", "loss_type": "sequence_mean"},
           notes="entropy penalty (negative coefficient)"),
        _r("empty_rows_skip", 326, 4, 8, 300, empty_rows=(2,),
           params={"loss_type": "sequence_mean", "empty_rows": "skip"}),
        _r("empty_rows_skip_row_count", 327, 4, 8, 300, empty_rows=(0, 3), rows_extra=3.0,
           params={"loss_type": "sequence_mean", "empty_rows": "skip", "total_nonempty_rows": 1.0},
           notes="run-time total_nonempty_rows (micro-batching) larger than the local count"),
        _r("combo_many_options", 328, 4, 10, 1187, ratio_spread=0.5, empty_rows=(1,),
           params={"policy_loss": "ppo_clip", "delta": 1.3, "log_ratio_clamp": 0.35, "beta": 0.03,
                   "kl_estimator": "k3", "advantage_shape": "token", "entropy_coef": 0.02,
                   "loss_type": "sequence_mean", "empty_rows": "skip", "is_level": "token", "is_mode": "truncate",
                   "is_cap": 1.5, "temperature": 0.9, "temp_mode": "post_lse"},
           expect=("clamped", "delta_active", "is_over", "is_under", "pg_live", "pg_dead")),
        _r("combo_gspo_is_rows_post_lse", 329, 4, 9, 515, ratio_spread=0.45, empty_rows=(2,),
           params={"policy_loss": "gspo", "log_ratio_clamp": 0.4, "loss_type": "sequence_mean", "empty_rows": "skip",
                   "total_nonempty_rows": 1.0, "is_level": "sequence", "is_mode": "truncate", "is_cap": 2.5,
                   "advantage_shape": "token", "beta": 0.04, "entropy_coef": 0.01, "temperature": 1.2,
                   "temp_mode": "post_lse"}, expect=("clamped",)),
    ]


def fused_v2_cases() -> list:
    return [
        _r("fused_gspo", 401, 3, 8, 700, H=32, ratio_spread=0.3,
           params={"policy_loss": "gspo", "loss_type": "sequence_mean"}, expect=("gspo_rows_in", "gspo_rows_out")),
        _r("fused_entropy", 402, 2, 12, 1030, H=32,
           params={"entropy_coef": 0.03, "temperature": 1.25, "temp_mode": "post_lse"}),
        _r("fused_cispo_is", 403, 2, 10, 600, H=32, ratio_spread=0.4,
           params={"policy_loss": "cispo", "is_level": "token", "is_mode": "mask", "is_cap": 1.8},
           expect=("cispo_trunc", "is_over", "is_under")),
        _r("fused_sapo_lowvar_bf16", 404, 2, 8, 700, H=32, dtype="bf16", lowvar_extremes=True,
           params={"policy_loss": "sapo", "beta": 0.1, "kl_estimator": "low_var_kl", "advantage_shape": "token"},
           expect=("lowvar_dclip",)),
        _r("fused_gspo_token_is_rows", 405, 3, 6, 500, H=16, ratio_spread=0.4, empty_rows=(1,),
           params={"policy_loss": "gspo_token", "log_ratio_clamp": 0.3, "is_level": "sequence",
                   "is_mode": "truncate", "loss_type": "sequence_mean", "empty_rows": "skip",
                   "total_nonempty_rows": 1.0}),
        _r("fused_ppo_everything", 406, 2, 7, 777, H=24, ratio_spread=0.5,
           params={"delta": 1.3, "log_ratio_clamp": 0.4, "beta": 0.05, "kl_estimator": "k2", "entropy_coef": 0.02,
                   "temperature": 0.9, "total_valid_tokens": 1.0}, expect=("clamped",)),
    ]


def all_cases() -> dict:
    """{folder: [Recipe]} in folder order."""
    return {GRPO: grpo_cases(), GRPO_FUSED: fused_cases(), GRPO_V2: v2_cases(), GRPO_FUSED_V2: fused_v2_cases()}

#include "kernels/grpo_config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "nlohmann/json.hpp"

namespace tpuoff::kernels {
namespace {

absl::Status Bad(absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("GrpoConfig: ", msg));
}

}  // namespace

absl::string_view TemperatureModeName(TemperatureMode mode) {
  return mode == TemperatureMode::kPostLse ? "post_lse" : "pre_softmax";
}

absl::StatusOr<TemperatureMode> ParseTemperatureMode(absl::string_view name) {
  if (name == "pre_softmax") return TemperatureMode::kPreSoftmax;
  if (name == "post_lse") return TemperatureMode::kPostLse;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown temperature mode '", name, "' (expected pre_softmax or post_lse)"));
}

absl::string_view LossTypeName(LossType type) {
  switch (type) {
    case LossType::kTokenMean: return "token_mean";
    case LossType::kSequenceMean: return "sequence_mean";
    case LossType::kConstant: return "constant";
  }
  return "?";
}

absl::StatusOr<LossType> ParseLossType(absl::string_view name) {
  if (name == "token_mean") return LossType::kTokenMean;
  if (name == "sequence_mean") return LossType::kSequenceMean;
  if (name == "constant") return LossType::kConstant;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown loss type '", name, "' (expected token_mean, sequence_mean or constant)"));
}

absl::string_view KernelModeName(KernelMode mode) {
  switch (mode) {
    case KernelMode::kFwd: return "fwd";
    case KernelMode::kBwd: return "bwd";
    case KernelMode::kFwdBwd: return "fwd_bwd";
  }
  return "?";
}

absl::StatusOr<KernelMode> ParseKernelMode(absl::string_view name) {
  if (name == "fwd") return KernelMode::kFwd;
  if (name == "bwd") return KernelMode::kBwd;
  if (name == "fwd_bwd") return KernelMode::kFwdBwd;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown kernel mode '", name, "' (expected fwd, bwd or fwd_bwd)"));
}

namespace {

// A float parameter as the kernels use it: an f32 constant (also with bf16
// logits, whose math runs in f32). It must survive the conversion: finite,
// and a normal f32 unless it is exactly 0 (a value below f32's smallest
// normal number turns into 0 or a denormal, e.g. temperature=1e-300 would
// divide by 0 and make every output NaN).
absl::Status CheckF32Parameter(const char* name, double v) {
  if (!std::isfinite(v)) return Bad(absl::StrCat(name, " must be finite, got ", v));
  if (std::fabs(v) > std::numeric_limits<float>::max()) {
    return Bad(absl::StrCat(name, "=", v, " overflows f32, the type the kernels compute in "
                            "(largest ", std::numeric_limits<float>::max(), ")"));
  }
  if (v != 0 && std::fabs(v) < std::numeric_limits<float>::min()) {
    return Bad(absl::StrCat(name, "=", v, " is below the smallest normal f32 (",
                            std::numeric_limits<float>::min(),
                            "): the kernels compute in f32 and would see 0 or a denormal"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGrpoConfig(const GrpoConfig& c) {
  if (c.batch <= 0 || c.seq <= 0 || c.vocab <= 0) {
    return Bad(absl::StrCat("batch, seq and vocab must be > 0, got [", c.batch, ",", c.seq,
                            ",", c.vocab, "]"));
  }
  // chosen_ids and tile offsets are s32.
  constexpr int64_t kMaxS32 = std::numeric_limits<int32_t>::max();
  if (c.vocab > kMaxS32 || c.seq > kMaxS32 || c.batch > kMaxS32) {
    return Bad("batch, seq and vocab must fit in s32");
  }
  if (c.batch > std::numeric_limits<int64_t>::max() / c.seq / c.vocab) {
    return Bad("batch*seq*vocab overflows int64");
  }
  if (c.logits_type != hlo::PrimitiveType::kF32 &&
      c.logits_type != hlo::PrimitiveType::kBF16) {
    return Bad(absl::StrCat("logits type must be f32 or bf16, got ",
                            hlo::PrimitiveTypeName(c.logits_type)));
  }
  for (auto [name, value] : {std::pair{"eps_low", c.eps_low}, {"eps_high", c.eps_high},
                             {"temperature", c.temperature}, {"beta", c.beta},
                             {"delta", c.delta.value_or(2.0)}}) {
    RETURN_IF_ERROR(CheckF32Parameter(name, value));
  }
  // The range checks below hold for the f32 values the kernels use too.
  if (static_cast<float>(c.eps_low) >= 1.0f) {
    return Bad(absl::StrCat("eps_low must be in [0, 1), got ", c.eps_low,
                            c.eps_low < 1 ? " (1 in f32)" : ""));
  }
  if (c.delta.has_value() && static_cast<float>(*c.delta) <= 1.0f && *c.delta > 1) {
    return Bad(absl::StrCat("delta must be > 1 when set, got ", *c.delta, " (1 in f32)"));
  }
  if (!std::isfinite(c.eps_low) || c.eps_low < 0 || c.eps_low >= 1) {
    return Bad(absl::StrCat("eps_low must be in [0, 1), got ", c.eps_low));
  }
  if (!std::isfinite(c.eps_high) || c.eps_high < 0) {
    return Bad(absl::StrCat("eps_high must be finite and >= 0, got ", c.eps_high));
  }
  if (!std::isfinite(c.temperature) || c.temperature <= 0) {
    return Bad(absl::StrCat("temperature must be finite and > 0, got ", c.temperature));
  }
  if (!std::isfinite(c.beta) || c.beta < 0) {
    return Bad(absl::StrCat("beta must be finite and >= 0, got ", c.beta));
  }
  if (c.delta.has_value() && (!std::isfinite(*c.delta) || *c.delta <= 1)) {
    return Bad(absl::StrCat("delta must be finite and > 1 when set, got ", *c.delta));
  }
  if (c.max_len.has_value() && *c.max_len <= 0) {
    return Bad(absl::StrCat("max_len must be > 0, got ", *c.max_len));
  }
  if (c.max_len.has_value() && c.loss_type != LossType::kConstant) {
    return Bad(absl::StrCat("max_len is only used by loss_type constant, not ",
                            LossTypeName(c.loss_type)));
  }
  if (c.token_count_input && c.loss_type != LossType::kTokenMean) {
    return Bad(absl::StrCat("a run-time token count (total_valid_tokens) needs loss_type "
                            "token_mean, not ",
                            LossTypeName(c.loss_type)));
  }
  if (c.block_size <= 0) {
    return Bad(absl::StrCat("block_size must be > 0, got ", c.block_size));
  }
  if (c.time_block.has_value() && *c.time_block <= 0) {
    return Bad(absl::StrCat("time_block must be > 0 when set, got ", *c.time_block));
  }
  if (c.hidden < 0 || c.hidden > std::numeric_limits<int32_t>::max()) {
    return Bad(absl::StrCat("hidden must be in [0, 2^31) (0 = unset), got ", c.hidden));
  }
  if (c.token_chunk.has_value() && *c.token_chunk <= 0) {
    return Bad(absl::StrCat("token_chunk must be > 0 when set, got ", *c.token_chunk));
  }
  return absl::OkStatus();
}

std::vector<std::string> GrpoParameterNames(const GrpoConfig& config, KernelMode mode) {
  std::vector<std::string> names = {"logits", "chosen_ids", "completion_mask", "advantages"};
  if (!config.on_policy) names.push_back("old_logp");
  if (config.beta != 0) names.push_back("ref_logp");
  if (config.token_count_input) names.push_back("total_valid_tokens");
  if (mode == KernelMode::kBwd) {
    names.push_back("lse");
    names.push_back("logp");
  }
  return names;
}

std::vector<std::string> GrpoOutputNames(KernelMode mode) {
  if (mode == KernelMode::kBwd) return {"dlogits"};
  std::vector<std::string> names = {"loss", "per_token_loss", "logp", "entropy", "lse"};
  if (mode == KernelMode::kFwdBwd) names.push_back("dlogits");
  return names;
}

namespace {

using Json = nlohmann::json;

absl::StatusOr<const Json*> Member(const Json& obj, absl::string_view key,
                                   Json::value_t kind, absl::string_view where) {
  auto it = obj.find(std::string(key));
  if (it == obj.end()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": missing \"", key, "\""));
  }
  // Integers and floats are both "number" to the case files.
  const bool number_ok = kind == Json::value_t::number_float && it->is_number();
  if (it->type() != kind && !number_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": \"", key, "\" must be a ", Json(kind).type_name(), ", got ",
        it->type_name()));
  }
  return &*it;
}

absl::StatusOr<int64_t> IntegerOf(const Json& v, absl::string_view what) {
  const double d = v.is_number() ? v.get<double>() : 0.5;
  if (d != std::floor(d) || std::fabs(d) > 9.0e15) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be an integer"));
  }
  return static_cast<int64_t>(d);
}

const Json* Find(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

absl::StatusOr<Json> ParseJsonText(const std::string& text, absl::string_view where) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    // Name the place as file:line:col; e.byte is 1-based.
    int line = 1, col = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
    if (size_t p = what.find("syntax error"); p != std::string::npos) what = what.substr(p);
    return absl::InvalidArgumentError(absl::StrCat(where, ":", line, ":", col, ": ", what));
  }
}

// The "Policy-loss variants (v2)" parameters of GRPO_SPEC.md, which GrpoConfig does
// not hold yet: a case may name them at their default (the loss is then the v1 loss);
// any other valid value is refused by name as not supported yet, an invalid one as
// invalid. `values` lists a string option's values, default first; a numeric option
// has none (its default is `number`, or unset when `optional_number`).
struct V2Option {
  const char* key;
  std::vector<const char*> values;
  double number = 0;
  bool optional_number = false;
};

const std::vector<V2Option>& V2Options() {
  static const auto* options = new std::vector<V2Option>{
      {"policy_loss", {"ppo_clip", "gspo", "gspo_token", "cispo", "sapo"}},
      {"kl_estimator", {"k3", "k1", "k2", "low_var_kl"}},
      {"advantage_shape", {"sequence", "token"}},
      {"empty_rows", {"count", "skip"}},
      {"is_level", {"none", "token", "sequence"}},
      {"is_mode", {"truncate", "mask"}},
      {"log_ratio_clamp", {}, 0, true},
      {"entropy_coef", {}, 0.0},
      {"sapo_tau_pos", {}, 1.0},
      {"sapo_tau_neg", {}, 1.05},
      {"is_cap", {}, 2.0},
      {"total_nonempty_rows", {}, 0, true},  // a run-time input, like total_valid_tokens
  };
  return *options;
}

// OK when `value` is `option`'s default; Unimplemented for another valid value.
absl::Status CheckV2Option(const V2Option& option, const Json& value, absl::string_view what) {
  const std::string not_yet = absl::StrCat(
      what, "=", value.dump(),
      ": a policy-loss variant (GRPO_SPEC.md v2) GrpoConfig does not support yet; only its "
      "default is accepted");
  if (!option.values.empty()) {
    if (!value.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(what, " must be a string"));
    }
    const std::string s = value.get<std::string>();
    for (size_t i = 0; i < option.values.size(); ++i) {
      if (s != option.values[i]) continue;
      return i == 0 ? absl::OkStatus() : absl::UnimplementedError(not_yet);
    }
    std::string allowed;
    for (const char* v : option.values) absl::StrAppend(&allowed, allowed.empty() ? "" : "|", v);
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unknown value '", s, "' (expected ", allowed, ")"));
  }
  if (value.is_null() && option.optional_number) return absl::OkStatus();
  if (!value.is_number() || !std::isfinite(value.get<double>())) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be a finite number"));
  }
  if (!option.optional_number && value.get<double>() == option.number) return absl::OkStatus();
  return absl::UnimplementedError(not_yet);
}

const V2Option* FindV2Option(absl::string_view key) {
  for (const V2Option& option : V2Options()) {
    if (key == option.key) return &option;
  }
  return nullptr;
}

absl::StatusOr<GrpoConfig> ConfigFromJson(const Json& root,
                                          absl::string_view where) {
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": top level must be an object"));
  }
  GrpoConfig config;
  ASSIGN_OR_RETURN(const Json* shape,
                   Member(root, "shape", Json::value_t::object, where));
  int64_t* dims[] = {&config.batch, &config.seq, &config.vocab};
  const char* keys[] = {"B", "T", "V"};
  for (int i = 0; i < 3; ++i) {
    ASSIGN_OR_RETURN(const Json* d,
                     Member(*shape, keys[i], Json::value_t::number_float, where));
    ASSIGN_OR_RETURN(*dims[i], IntegerOf(*d, absl::StrCat(where, ": shape.", keys[i])));
  }
  // H: the fused LM-head cases (grpo_fused/) only.
  if (const Json* h = Find(*shape, "H"); h != nullptr) {
    ASSIGN_OR_RETURN(config.hidden, IntegerOf(*h, absl::StrCat(where, ": shape.H")));
  }
  if (const Json* t = Find(root, "logits_dtype"); t != nullptr) {
    if (!t->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": logits_dtype must be a string"));
    }
    if (t->get<std::string>() == "f32" || t->get<std::string>() == "float32") {
      config.logits_type = hlo::PrimitiveType::kF32;
    } else if (t->get<std::string>() == "bf16" || t->get<std::string>() == "bfloat16") {
      config.logits_type = hlo::PrimitiveType::kBF16;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": logits_dtype must be f32 or bf16, got ", t->get<std::string>()));
    }
  }
  if (const Json* p = Find(root, "on_policy"); p != nullptr) {
    if (!p->is_boolean()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": on_policy must be a bool"));
    }
    config.on_policy = p->get<bool>();
  }
  if (const Json* params = Find(root, "params"); params != nullptr) {
    if (!params->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": params must be an object"));
    }
    for (auto it = params->begin(); it != params->end(); ++it) {
      const std::string& key = it.key();
      const Json& value = it.value();
      const std::string what = absl::StrCat(where, ": params.", key);
      auto number = [&]() -> absl::StatusOr<double> {
        if (!value.is_number()) {
          return absl::InvalidArgumentError(absl::StrCat(what, " must be a number"));
        }
        return value.get<double>();
      };
      auto string = [&]() -> absl::StatusOr<std::string> {
        if (!value.is_string()) {
          return absl::InvalidArgumentError(absl::StrCat(what, " must be a string"));
        }
        return value.get<std::string>();
      };
      if (key == "eps_low") {
        ASSIGN_OR_RETURN(config.eps_low, number());
      } else if (key == "eps_high") {
        ASSIGN_OR_RETURN(config.eps_high, number());
      } else if (key == "temperature") {
        ASSIGN_OR_RETURN(config.temperature, number());
      } else if (key == "beta") {
        ASSIGN_OR_RETURN(config.beta, number());
      } else if (key == "delta") {
        if (!value.is_null()) {
          ASSIGN_OR_RETURN(double d, number());
          config.delta = d;
        }
      } else if (key == "temp_mode" || key == "temperature_mode") {
        ASSIGN_OR_RETURN(std::string s, string());
        ASSIGN_OR_RETURN(config.temperature_mode, ParseTemperatureMode(s));
      } else if (key == "loss_type") {
        ASSIGN_OR_RETURN(std::string s, string());
        ASSIGN_OR_RETURN(config.loss_type, ParseLossType(s));
      } else if (key == "max_len") {
        ASSIGN_OR_RETURN(int64_t n, IntegerOf(value, what));
        config.max_len = n;
      } else if (key == "total_valid_tokens") {
        // The value itself is a run-time input (total_valid_tokens.npy).
        config.token_count_input = !value.is_null();
      } else if (const V2Option* option = FindV2Option(key); option != nullptr) {
        RETURN_IF_ERROR(CheckV2Option(*option, value, what));
      } else {
        return absl::InvalidArgumentError(absl::StrCat(what, ": unknown parameter"));
      }
    }
  }
  RETURN_IF_ERROR(ValidateGrpoConfig(config));
  return config;
}

}  // namespace

absl::StatusOr<GrpoConfig> GrpoConfigFromCaseJson(absl::string_view path_or_text) {
  absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(path_or_text);
  if (!trimmed.empty() && trimmed.front() == '{') {
    ASSIGN_OR_RETURN(Json root, ParseJsonText(std::string(trimmed), "case.json"));
    return ConfigFromJson(root, "case.json");
  }
  std::string path(path_or_text);
  if (!absl::EndsWith(path, ".json")) path = absl::StrCat(path, "/case.json");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(Json root, ParseJsonText(text.str(), path));
  return ConfigFromJson(root, path);
}

}  // namespace tpuoff::kernels

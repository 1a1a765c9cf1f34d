// GrpoConfigFromCaseJson: a test-vector case.json (tests/testdata/README.md)
// to a GrpoConfig.
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/status_macros.h"
#include "kernels/grpo_config.h"
#include "kernels/grpo_presets.h"
#include "nlohmann/json.hpp"

namespace tpuoff::kernels {

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

// One entry of "params": a number, a string naming an enum value, or null
// for an unset optional (delta, log_ratio_clamp, max_len, the run-time counts).
absl::Status ReadParam(const std::string& key, const Json& value, const std::string& what,
                       GrpoConfig* c) {
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
  auto optional = [&](std::optional<double>* out) -> absl::Status {
    if (value.is_null()) {
      out->reset();
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(double d, number());
    *out = d;
    return absl::OkStatus();
  };
  // An enum parameter through its Parse function; errors name the key.
  auto named = [&](auto parse, auto* out) -> absl::Status {
    ASSIGN_OR_RETURN(std::string s, string());
    auto parsed = parse(s);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", parsed.status().message()));
    }
    *out = *parsed;
    return absl::OkStatus();
  };
  if (key == "eps_low") {
    ASSIGN_OR_RETURN(c->eps_low, number());
  } else if (key == "eps_high") {
    ASSIGN_OR_RETURN(c->eps_high, number());
  } else if (key == "temperature") {
    ASSIGN_OR_RETURN(c->temperature, number());
  } else if (key == "beta") {
    ASSIGN_OR_RETURN(c->beta, number());
  } else if (key == "delta") {
    return optional(&c->delta);
  } else if (key == "temp_mode" || key == "temperature_mode") {
    return named(ParseTemperatureMode, &c->temperature_mode);
  } else if (key == "loss_type") {
    return named(ParseLossType, &c->loss_type);
  } else if (key == "max_len") {
    if (value.is_null()) {
      c->max_len.reset();
    } else {
      ASSIGN_OR_RETURN(int64_t n, IntegerOf(value, what));
      c->max_len = n;
    }
  } else if (key == "total_valid_tokens") {
    // The value itself is a run-time input (total_valid_tokens.npy).
    c->token_count_input = !value.is_null();
  } else if (key == "total_nonempty_rows") {
    c->row_count_input = !value.is_null();  // likewise total_nonempty_rows.npy
  } else if (key == "policy_loss") {
    return named(ParsePolicyLoss, &c->policy_loss);
  } else if (key == "kl_estimator") {
    return named(ParseKlEstimator, &c->kl_estimator);
  } else if (key == "log_ratio_clamp") {
    return optional(&c->log_ratio_clamp);
  } else if (key == "advantage_shape") {
    return named(ParseAdvantageShape, &c->advantage_shape);
  } else if (key == "entropy_coef") {
    ASSIGN_OR_RETURN(c->entropy_coef, number());
  } else if (key == "empty_rows") {
    return named(ParseEmptyRows, &c->empty_rows);
  } else if (key == "sapo_tau_pos") {
    ASSIGN_OR_RETURN(c->sapo_tau_pos, number());
  } else if (key == "sapo_tau_neg") {
    ASSIGN_OR_RETURN(c->sapo_tau_neg, number());
  } else if (key == "is_level") {
    return named(ParseIsLevel, &c->is_level);
  } else if (key == "is_mode") {
    return named(ParseIsMode, &c->is_mode);
  } else if (key == "is_cap") {
    ASSIGN_OR_RETURN(c->is_cap, number());
  } else {
    return absl::InvalidArgumentError(absl::StrCat(what, ": unknown parameter"));
  }
  return absl::OkStatus();
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
  // A trainer preset (kernels/grpo_presets.h) first; params override it.
  if (const Json* preset = Find(root, "preset"); preset != nullptr) {
    if (!preset->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": preset must be a string"));
    }
    absl::Status s = ApplyGrpoPreset(preset->get<std::string>(), &config);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
  }
  if (const Json* params = Find(root, "params"); params != nullptr) {
    if (!params->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": params must be an object"));
    }
    for (auto it = params->begin(); it != params->end(); ++it) {
      RETURN_IF_ERROR(ReadParam(it.key(), it.value(), absl::StrCat(where, ": params.", it.key()),
                                &config));
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

#include "tools/cli/flags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tpuoff::tools {
namespace {

std::string FormatDouble(double v) { return absl::StrFormat("%g", v); }

// Flag registration mistakes are programmer errors (no user input involved).
void ProgrammerCheck(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FlagSet misuse: %s\n", what.c_str());
    std::abort();
  }
}

absl::Status UsageError(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

}  // namespace

FlagSet::FlagSet(std::string command, std::string synopsis,
                 std::string description)
    : command_(std::move(command)),
      synopsis_(std::move(synopsis)),
      description_(std::move(description)) {}

void FlagSet::Add(Flag flag) {
  ProgrammerCheck(Find(flag.name) == nullptr, "duplicate flag --" + flag.name);
  ProgrammerCheck(flag.name != "help", "--help is built in");
  flags_.push_back(std::move(flag));
}

void FlagSet::AddBool(const std::string& name, bool* out,
                      const std::string& help) {
  Add({name, Kind::kBool, out, help, *out ? "true" : "false", {}});
}

void FlagSet::AddInt64(const std::string& name, int64_t* out,
                       const std::string& help) {
  Add({name, Kind::kInt64, out, help, absl::StrCat(*out), {}});
}

void FlagSet::AddDouble(const std::string& name, double* out,
                        const std::string& help) {
  Add({name, Kind::kDouble, out, help, FormatDouble(*out), {}});
}

void FlagSet::AddString(const std::string& name, std::string* out,
                        const std::string& help, const std::string& metavar) {
  Add({name, Kind::kString, out, help, out->empty() ? "\"\"" : *out, {},
       metavar});
}

void FlagSet::AddEnum(const std::string& name, std::string* out,
                      std::vector<std::string> choices,
                      const std::string& help) {
  Add({name, Kind::kEnum, out, help, out->empty() ? "\"\"" : *out,
       std::move(choices)});
}

void FlagSet::AddOptionalInt64(const std::string& name,
                               std::optional<int64_t>* out,
                               const std::string& help) {
  Add({name, Kind::kOptInt64, out, help,
       out->has_value() ? absl::StrCat(**out) : "none", {}});
}

void FlagSet::AddOptionalDouble(const std::string& name,
                                std::optional<double>* out,
                                const std::string& help) {
  Add({name, Kind::kOptDouble, out, help,
       out->has_value() ? FormatDouble(**out) : "none", {}});
}

void FlagSet::SetPositionals(std::string name, int min_count, int max_count) {
  ProgrammerCheck(min_count <= max_count, "positional min > max");
  positional_name_ = std::move(name);
  min_positionals_ = min_count;
  max_positionals_ = max_count;
}

FlagSet::Flag* FlagSet::Find(const std::string& name) {
  for (Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool FlagSet::WasSet(const std::string& name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return f.set;
  }
  return false;
}

std::vector<std::string> FlagSet::Names() const {
  std::vector<std::string> names;
  for (const Flag& f : flags_) names.push_back(f.name);
  return names;
}

absl::Status FlagSet::SetValue(Flag& flag, const std::string& value) {
  const std::string where = absl::StrCat(command_, ": --", flag.name);
  switch (flag.kind) {
    case Kind::kBool: {
      std::string v = absl::AsciiStrToLower(value);
      if (v == "true" || v == "1") {
        *static_cast<bool*>(flag.out) = true;
      } else if (v == "false" || v == "0") {
        *static_cast<bool*>(flag.out) = false;
      } else {
        return UsageError(absl::StrCat(where, " expects true or false, got '",
                                       value, "'"));
      }
      break;
    }
    case Kind::kInt64:
    case Kind::kOptInt64: {
      int64_t v;
      if (value.empty() || absl::StripAsciiWhitespace(value) != value ||
          !absl::SimpleAtoi(value, &v)) {
        return UsageError(
            absl::StrCat(where, " expects an integer, got '", value, "'"));
      }
      if (flag.kind == Kind::kInt64) {
        *static_cast<int64_t*>(flag.out) = v;
      } else {
        *static_cast<std::optional<int64_t>*>(flag.out) = v;
      }
      break;
    }
    case Kind::kDouble:
    case Kind::kOptDouble: {
      double v;
      if (value.empty() || absl::StripAsciiWhitespace(value) != value ||
          !absl::SimpleAtod(value, &v) || !std::isfinite(v)) {
        return UsageError(absl::StrCat(where, " expects a finite number, got '",
                                       value, "'"));
      }
      if (flag.kind == Kind::kDouble) {
        *static_cast<double*>(flag.out) = v;
      } else {
        *static_cast<std::optional<double>*>(flag.out) = v;
      }
      break;
    }
    case Kind::kString:
      *static_cast<std::string*>(flag.out) = value;
      break;
    case Kind::kEnum: {
      bool ok = false;
      for (const std::string& c : flag.choices) ok |= (c == value);
      if (!ok) {
        return UsageError(absl::StrCat(where, " expects one of ",
                                       absl::StrJoin(flag.choices, "|"),
                                       ", got '", value, "'"));
      }
      *static_cast<std::string*>(flag.out) = value;
      break;
    }
  }
  flag.set = true;
  return absl::OkStatus();
}

absl::Status FlagSet::Parse(absl::Span<const std::string> args) {
  positionals_.clear();
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    // "-" alone is a positional (stdin/stdout); "--" ends flag parsing.
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      positionals_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      help_requested_ = true;
      continue;
    }
    if (arg[1] != '-') {
      return UsageError(absl::StrCat(command_, ": unknown option '", arg,
                                     "' (flags are spelled --name=value)"));
    }
    std::string body = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      value = body.substr(eq + 1);
      body = body.substr(0, eq);
    }
    Flag* flag = Find(body);
    if (flag == nullptr) {
      return UsageError(absl::StrCat(command_, ": unknown flag --", body));
    }
    if (flag->set) {
      return UsageError(
          absl::StrCat(command_, ": --", body, " given more than once"));
    }
    if (!value.has_value()) {
      if (flag->kind == Kind::kBool) {
        value = "true";
      } else if (i + 1 < args.size() &&
                 !(args[i + 1].size() >= 2 && args[i + 1].rfind("--", 0) == 0)) {
        // The next argument is the value unless it looks like another flag;
        // "-" and negative numbers are values.
        value = args[++i];
      } else {
        return UsageError(absl::StrCat(command_, ": --", body,
                                       " needs a value (", KindText(*flag),
                                       ")"));
      }
    }
    if (absl::Status s = SetValue(*flag, *value); !s.ok()) return s;
  }
  if (help_requested_) return absl::OkStatus();
  const int n = static_cast<int>(positionals_.size());
  if (n < min_positionals_ || n > max_positionals_) {
    std::string expected =
        min_positionals_ == max_positionals_
            ? absl::StrCat(min_positionals_)
            : absl::StrCat(min_positionals_, " to ", max_positionals_);
    if (max_positionals_ == 0) {
      return UsageError(absl::StrCat(command_, ": unexpected argument '",
                                     positionals_[0], "'"));
    }
    return UsageError(absl::StrCat(command_, ": expected ", expected, " ",
                                   positional_name_, " argument(s), got ", n));
  }
  return absl::OkStatus();
}

std::string FlagSet::KindText(const Flag& flag) {
  switch (flag.kind) {
    case Kind::kBool:
      return "";
    case Kind::kInt64:
    case Kind::kOptInt64:
      return "INT";
    case Kind::kDouble:
    case Kind::kOptDouble:
      return "NUM";
    case Kind::kString:
      return flag.metavar;
    case Kind::kEnum:
      return absl::StrJoin(flag.choices, "|");
  }
  return "";
}

std::string FlagSet::Usage() const {
  std::string out = absl::StrCat("usage: ", command_, " ", synopsis_, "\n");
  if (!description_.empty()) absl::StrAppend(&out, "\n", description_, "\n");
  if (flags_.empty()) return out;
  absl::StrAppend(&out, "\nflags:\n");
  std::vector<std::string> heads;
  size_t width = 0;
  for (const Flag& f : flags_) {
    std::string kind = KindText(f);
    heads.push_back(kind.empty() ? absl::StrCat("--", f.name)
                                 : absl::StrCat("--", f.name, "=", kind));
    width = std::max(width, heads.back().size());
  }
  width = std::min<size_t>(width, 34);
  for (size_t i = 0; i < flags_.size(); ++i) {
    std::string line = absl::StrCat("  ", heads[i]);
    if (heads[i].size() > width) {
      absl::StrAppend(&line, "\n", std::string(width + 4, ' '));
    } else {
      line.append(width + 2 - heads[i].size(), ' ');
    }
    absl::StrAppend(&line, flags_[i].help, " (default: ",
                    flags_[i].default_text, ")\n");
    absl::StrAppend(&out, line);
  }
  absl::StrAppend(&out, "  --help", std::string(width > 4 ? width - 4 : 2, ' '),
                  "show this help\n");
  return out;
}

}  // namespace tpuoff::tools

// A small strict command-line flag parser for tpuoff subcommands.
//
// Accepted forms: `--name=value`, `--name value`, boolean `--flag` (or
// `--flag=true|false`), positional arguments, and `--` to end flags. Unknown
// flags, missing or malformed values and wrong positional counts are
// INVALID_ARGUMENT errors whose message says what was expected; the CLI maps
// them to exit code 2. `--help` / `-h` is always accepted.
#ifndef TPUOFF_TOOLS_CLI_FLAGS_H_
#define TPUOFF_TOOLS_CLI_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tpuoff::tools {

class FlagSet {
 public:
  // `command` is e.g. "tpuoff dump"; `synopsis` the argument summary after it
  // ("MODULE_FILE [flags]"); `description` a paragraph for --help.
  FlagSet(std::string command, std::string synopsis, std::string description);

  // Each Add* binds a flag to `out`; the value `*out` holds at registration is
  // the default shown by --help. Names are given without the leading dashes.
  void AddBool(const std::string& name, bool* out, const std::string& help);
  void AddInt64(const std::string& name, int64_t* out, const std::string& help);
  void AddDouble(const std::string& name, double* out, const std::string& help);
  // `metavar` names the value in --help (--out=FILE).
  void AddString(const std::string& name, std::string* out,
                 const std::string& help, const std::string& metavar = "STR");
  // A string restricted to `choices`.
  void AddEnum(const std::string& name, std::string* out,
               std::vector<std::string> choices, const std::string& help);
  // Flags whose default is "unset" (shown as `none` in --help).
  void AddOptionalInt64(const std::string& name, std::optional<int64_t>* out,
                        const std::string& help);
  void AddOptionalDouble(const std::string& name, std::optional<double>* out,
                         const std::string& help);
  // Restricts the number of positional arguments; `name` is used in errors.
  void SetPositionals(std::string name, int min_count, int max_count);

  // Parses `args` (without the program and subcommand names). On success the
  // bound variables hold the values and positionals() the positional args.
  absl::Status Parse(absl::Span<const std::string> args);

  bool help_requested() const { return help_requested_; }
  const std::vector<std::string>& positionals() const { return positionals_; }
  // Whether the flag appeared on the command line (for "either X or Y" checks).
  bool WasSet(const std::string& name) const;
  // Every registered flag name (without dashes), in registration order.
  std::vector<std::string> Names() const;

  // The generated --help text: synopsis, description, each flag with its
  // value kind, default and meaning.
  std::string Usage() const;

 private:
  enum class Kind { kBool, kInt64, kDouble, kString, kEnum, kOptInt64, kOptDouble };
  struct Flag {
    std::string name;
    Kind kind;
    void* out;
    std::string help;
    std::string default_text;
    std::vector<std::string> choices;
    std::string metavar;
    bool set = false;
  };

  void Add(Flag flag);
  Flag* Find(const std::string& name);
  absl::Status SetValue(Flag& flag, const std::string& value);
  static std::string KindText(const Flag& flag);

  std::string command_;
  std::string synopsis_;
  std::string description_;
  std::vector<Flag> flags_;
  std::string positional_name_ = "ARG";
  int min_positionals_ = 0;
  int max_positionals_ = 0;
  bool help_requested_ = false;
  std::vector<std::string> positionals_;
};

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_FLAGS_H_

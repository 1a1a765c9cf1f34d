// Shared plumbing of the subcommands: exit codes, one-line error reports and
// flag parsing with --help handling.
#ifndef TPUOFF_TOOLS_CLI_CLI_UTIL_H_
#define TPUOFF_TOOLS_CLI_CLI_UTIL_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tools/cli/flags.h"

namespace tpuoff::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// The status message on one line (newlines become "; "), for stderr.
std::string OneLine(absl::string_view message);

// `text` with control characters (bytes < 0x20 and 0x7f, except those in
// `keep`) written as \xNN, so names from a module file cannot drive the
// terminal. Every message and report the CLI prints goes through it.
std::string EscapeControlCharacters(absl::string_view text, absl::string_view keep = "");

// Prints "<command>: <message>" as a single line on stderr; returns
// kExitFailure so callers can `return ReportFailure(...)`.
int ReportFailure(absl::string_view command, const absl::Status& status);
// Like ReportFailure but keeps the message's line structure (for errors that
// list things, e.g. every expected input); continuation lines are indented.
int ReportFailureDetailed(absl::string_view command, const absl::Status& status);
// Same for usage errors (adds a --help hint); returns kExitUsage.
int ReportUsageError(absl::string_view command, absl::string_view message);

// Writes `text` (help, usage) to stdout: kExitOk, or kExitFailure after
// "<command>: <stdout>: write failed: ..." on stderr (a full disk, a
// closed pipe).
int PrintToStdout(absl::string_view command, absl::string_view text);

// Parses `args` into `flags`. Returns an exit code when the command must stop
// here: kExitOk after printing --help to stdout, kExitUsage after a usage
// error. std::nullopt means "carry on".
std::optional<int> ParseFlagsOrExit(FlagSet& flags, absl::string_view command,
                                    const std::vector<std::string>& args);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_CLI_UTIL_H_

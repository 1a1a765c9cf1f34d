#include "tools/cli/cli_util.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/match.h"
#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "runtime/device/process_world.h"
#include "tools/io/file_util.h"

namespace tpuoff::tools {

std::string OneLine(absl::string_view message) {
  std::string s(absl::StripTrailingAsciiWhitespace(message));
  return absl::StrReplaceAll(s, {{"\r\n", "; "}, {"\n", "; "}, {"\r", "; "}});
}

std::string EscapeControlCharacters(absl::string_view text, absl::string_view keep) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 || u == 0x7f) && keep.find(c) == absl::string_view::npos) {
      absl::StrAppendFormat(&out, "\\x%02x", u);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

namespace {

// "tpuoff run", or "tpuoff run [rank 1 of 4]" in a run across MPI ranks.
std::string Who(absl::string_view command) {
  if (!runtime::Distributed()) return std::string(command);
  return absl::StrCat(command, " [rank ", runtime::WorldRank(), " of ", runtime::WorldSize(), "]");
}

}  // namespace

int ReportFailure(absl::string_view command, const absl::Status& status) {
  std::string msg = EscapeControlCharacters(OneLine(status.message()));
  if (msg.empty()) msg = absl::StatusCodeToString(status.code());
  std::fprintf(stderr, "%s: %s\n", Who(command).c_str(), msg.c_str());
  std::fflush(stderr);
  return kExitFailure;
}

int ReportFailureDetailed(absl::string_view command,
                          const absl::Status& status) {
  std::string msg = EscapeControlCharacters(
      absl::StripTrailingAsciiWhitespace(status.message()), "\n");
  std::fprintf(stderr, "%s: %s\n", Who(command).c_str(), msg.c_str());
  std::fflush(stderr);
  return kExitFailure;
}

int PrintToStdout(absl::string_view command, absl::string_view text) {
  if (absl::Status s = WriteToStdout(text); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", std::string(command).c_str(),
                 EscapeControlCharacters(OneLine(s.message())).c_str());
    return kExitFailure;
  }
  return kExitOk;
}

int ReportUsageError(absl::string_view command, absl::string_view message) {
  std::string msg = EscapeControlCharacters(OneLine(message));
  // Flag-parser messages already start with the command name.
  if (!absl::StartsWith(msg, command)) msg = absl::StrCat(command, ": ", msg);
  if (runtime::Distributed()) msg = absl::StrCat(Who(command), msg.substr(command.size()));
  std::fprintf(stderr, "%s (run '%s --help' for usage)\n", msg.c_str(),
               std::string(command).c_str());
  std::fflush(stderr);
  return kExitUsage;
}

std::optional<int> ParseFlagsOrExit(FlagSet& flags, absl::string_view command,
                                    const std::vector<std::string>& args) {
  absl::Status s = flags.Parse(args);
  if (flags.help_requested()) return PrintToStdout(command, flags.Usage());
  if (!s.ok()) return ReportUsageError(command, s.message());
  return std::nullopt;
}

}  // namespace tpuoff::tools

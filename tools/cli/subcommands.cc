#include "tools/cli/subcommands.h"

#include <csignal>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/device/process_world.h"
#include "tools/cli/cli_util.h"

namespace tpuoff::tools {
namespace {

std::string TopLevelUsage() {
  std::string out =
      "usage: tpuoff SUBCOMMAND [args] [flags]\n"
      "       tpuoff SUBCOMMAND --help\n\n"
      "TPU-offload toolkit: HLO modules for GRPO-loss/entropy kernels, run on\n"
      "a host emulator of TPU v6e devices.\n\nsubcommands:\n";
  for (const Subcommand& c : AllSubcommands()) {
    std::string name = c.name;
    name.resize(std::max<size_t>(name.size() + 2, 10), ' ');
    absl::StrAppend(&out, "  ", name, c.summary, "\n");
  }
  absl::StrAppend(&out,
                  "\nexit codes: 0 success, 1 failure, 2 usage error\n");
  return out;
}

}  // namespace

absl::Span<const Subcommand> AllSubcommands() {
#define TPUOFF_SUBCOMMAND_ENTRY(name, fn, summary) Subcommand{name, &fn, summary},
  static const Subcommand kCommands[] = {
      TPUOFF_SUBCOMMANDS(TPUOFF_SUBCOMMAND_ENTRY)};
#undef TPUOFF_SUBCOMMAND_ENTRY
  return kCommands;
}

const Subcommand* FindSubcommand(const std::string& name) {
  for (const Subcommand& c : AllSubcommands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

namespace {
int TpuoffMainImpl(int argc, char** argv);
}  // namespace

namespace {

int GuardedMain(int argc, char** argv) {
  // The last line of defence: the subcommands check sizes against the host
  // before allocating, but whatever still throws ends as a message and exit
  // 1, never as SIGABRT.
  try {
    return TpuoffMainImpl(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("tpuoff: out of host memory (an allocation failed)\n",
               stderr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tpuoff: internal error: %s\n",
                 EscapeControlCharacters(e.what()).c_str());
  }
  return kExitFailure;
}

}  // namespace

int TpuoffMain(int argc, char** argv) {
  // A reader that goes away (`tpuoff dump ... | head -c1`) is a failed
  // write (EPIPE: a message and exit 1), not a death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  // Started by mpirun as one of several ranks: join the job (or, built
  // without MPI, refuse rather than run identical copies).
  if (absl::Status s = runtime::InitProcessWorld(&argc, &argv); !s.ok()) {
    std::fprintf(stderr, "tpuoff: %s\n", std::string(s.message()).c_str());
    if (runtime::Distributed()) runtime::AbortProcessWorld(kExitFailure, "");
    return kExitUsage;
  }
  const int code = GuardedMain(argc, argv);
  if (runtime::Distributed()) {
    // A rank that failed ends the whole job (its message is out already);
    // the others may be waiting for it at a collective or the gather.
    if (code != kExitOk) {
      runtime::AbortProcessWorld(
          code, absl::StrCat("tpuoff: rank ", runtime::WorldRank(), " of ", runtime::WorldSize(),
                             " failed (exit ", code, "): ending every rank"));
    }
    runtime::FinalizeProcessWorld();
  }
  return code;
}

namespace {

int TpuoffMainImpl(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(TopLevelUsage().c_str(), stderr);
    return kExitUsage;
  }
  std::string first = argv[1];
  std::vector<std::string> rest(argv + 2, argv + argc);
  if (first == "--help" || first == "-h" || first == "help") {
    // `tpuoff help dump` == `tpuoff dump --help`.
    if (first == "help" && !rest.empty()) {
      if (const Subcommand* c = FindSubcommand(rest[0])) {
        return c->main({"--help"});
      }
      return ReportUsageError("tpuoff", absl::StrCat("unknown subcommand '",
                                                      rest[0], "'"));
    }
    return PrintToStdout("tpuoff", TopLevelUsage());
  }
  const Subcommand* command = FindSubcommand(first);
  if (command != nullptr && runtime::Distributed() && first != "run" && first != "compare") {
    return ReportUsageError(
        "tpuoff", absl::StrCat("'", first, "' does not run across MPI ranks (started as ",
                               runtime::WorldSize(),
                               " ranks): only run and compare do; start it without mpirun"));
  }
  if (command == nullptr) {
    std::string known;
    for (const Subcommand& c : AllSubcommands()) {
      absl::StrAppend(&known, known.empty() ? "" : ", ", c.name);
    }
    return ReportUsageError(
        "tpuoff", absl::StrCat("unknown subcommand '", first,
                               "' (expected one of: ", known, ")"));
  }
  return command->main(rest);
}

}  // namespace

}  // namespace tpuoff::tools

// The registry of `tpuoff` subcommands. Adding one is one line in
// TPUOFF_SUBCOMMANDS plus its XxxMain in a tools/cli/cmd_xxx.cc.
//
// Exit codes shared by every subcommand: 0 success, 1 failure (bad input file,
// verification error, out of HBM, mismatch...), 2 usage error.
#ifndef TPUOFF_TOOLS_CLI_SUBCOMMANDS_H_
#define TPUOFF_TOOLS_CLI_SUBCOMMANDS_H_

#include <string>
#include <vector>

#include "absl/types/span.h"

namespace tpuoff::tools {

// X(name, main function, one-line summary)
#define TPUOFF_SUBCOMMANDS(X)                                                \
  X("dump", DumpMain,                                                        \
    "convert an HLO module (text/proto/json) or generate a GRPO kernel")     \
  X("run", RunMain,                                                          \
    "execute a module on the emulator or a PJRT plugin; outputs as .npy")    \
  X("compare", CompareMain,                                                  \
    "run a kernel unsharded and batch/vocab-sharded; diff outputs, HBM")     \
  X("memory", MemoryMain,                                                    \
    "static per-device HBM peaks, buffers live at the peak, TPU padding")     \
  X("compile", CompileMain,                                                  \
    "compile-only for a TPU topology (libtpu); XLA:TPU memory vs tpuoff's")   \
  X("cost", CostMain,                                                        \
    "static flops/bytes per op and predicted TPU v6e time per device")       \
  X("plan", PlanMain,                                                        \
    "largest batch that fits HBM over kernels, shardings, tiles; its flags")  \
  X("bench", BenchMain,                                                      \
    "time the emulator against XLA:CPU, a hand-fused floor and bandwidth")

// Each main gets the arguments after the subcommand name.
using SubcommandMain = int (*)(const std::vector<std::string>& args);

#define TPUOFF_DECLARE_SUBCOMMAND(name, fn, summary) \
  int fn(const std::vector<std::string>& args);
TPUOFF_SUBCOMMANDS(TPUOFF_DECLARE_SUBCOMMAND)
#undef TPUOFF_DECLARE_SUBCOMMAND

struct Subcommand {
  const char* name;
  SubcommandMain main;
  const char* summary;
};

absl::Span<const Subcommand> AllSubcommands();
// nullptr when unknown.
const Subcommand* FindSubcommand(const std::string& name);

// Entry point of the binary: dispatches argv[1], handles --help.
int TpuoffMain(int argc, char** argv);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_SUBCOMMANDS_H_

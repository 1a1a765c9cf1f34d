// The `tpuoff` command-line tool; subcommands live in tools/cli/cmd_*.cc and
// are listed in tools/cli/subcommands.h.
#include "tools/cli/subcommands.h"

int main(int argc, char** argv) { return tpuoff::tools::TpuoffMain(argc, argv); }

// The real-HLO corpus part of `tpuoff bench --corpus=DIR`: for each program of
// a jax_corpus.py corpus (tools/xla_check; sharded and known-unsupported
// programs left out), the module JAX lowers it to (CASE/jax.hlo) run on the
// emulator on the corpus's inputs (CASE/in/arg<i>.npy), planned once
// (runtime::PreparedModule; the planning timed apart, as XLA's compile is),
// next to XLA:CPU compiling and running the same module on the same inputs
// (tools/xla_check/bench_corpus.py, one Python process per corpus, after the
// emulator's side), as medians, and their ratios: runs alone, and plan + run
// (what one `tpuoff run` spends past parsing and input loading).
#ifndef TPUOFF_TOOLS_CLI_BENCH_CORPUS_H_
#define TPUOFF_TOOLS_CLI_BENCH_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/cli/bench_cases.h"

namespace tpuoff::tools {

struct CorpusRow {
  std::string corpus;  // the directory as given
  std::string name;    // program
  int64_t instructions = 0;  // in every computation of jax.hlo
  Timing emulator;  // runs of the planned module
  Timing plan;      // runtime::PreparedModule::Create
  Timing xla;       // runs of XLA:CPU's executable
};

// Every program of `corpus_dir` (index.json); a program that fails on one
// side has that side's error set. Fails only when the directory or its
// index cannot be read.
absl::StatusOr<std::vector<CorpusRow>> RunCorpusBench(const std::string& corpus_dir,
                                                      const BenchSettings& settings);

// Markdown: program, instructions, emulator, plan, XLA:CPU, the ratios.
std::string CorpusTable(const std::vector<CorpusRow>& rows);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_CLI_BENCH_CORPUS_H_

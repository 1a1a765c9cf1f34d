// How names from a module (parameters, outputs) become file names: never a
// path. Every character outside [A-Za-z0-9_.-] becomes '_', a leading '.'
// (hidden files, "..") gets a '_' in front, and clashes get _1, _2, ...
// suffixes in order. `run --inputs` reads and `run --outputs` writes files
// named this way; `dump`'s parameter list and every "expected parameters"
// message show them.
#ifndef TPUOFF_TOOLS_IO_FILE_NAMES_H_
#define TPUOFF_TOOLS_IO_FILE_NAMES_H_

#include <set>
#include <string>
#include <vector>

namespace tpuoff::tools {

// One name made file-safe (no uniqueness).
std::string FileSafeName(const std::string& name);

// File stems for `names`, in order: file-safe, and distinct from each other
// and from `reserved`.
std::vector<std::string> UniqueFileStems(const std::vector<std::string>& names,
                                         std::set<std::string> reserved = {});

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_FILE_NAMES_H_

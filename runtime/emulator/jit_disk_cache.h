// The loop JIT's persistent cache (runtime/emulator/loop_jit.h): the object
// code of compiled loop programs, one file per program, so a later process
// running the same loops (a second `tpuoff run`, the next test, the next
// training step's process) loads machine code instead of compiling it,
// as JAX's persistent compilation cache does for XLA.
//
// Where: $TPUOFF_JIT_CACHE (a directory; "off" or "0": no disk cache), else
// $XDG_CACHE_HOME/tpuoff/jit, else $HOME/.cache/tpuoff/jit.
// A file holds a magic line, its full key (the program's structure, the
// vector width, the CPU and its features, LLVM's version and the identity
// of the code generator's binary), the object's length and a 64-bit hash of
// it, then the object. A file whose key or hash does not match (another
// program under a colliding name, a truncated or corrupted file) is not
// used, and is replaced when the program is compiled again. Files are
// written to a temporary name and renamed into place, so concurrent
// processes only ever see whole files; any failure (no directory, a full
// disk, a read-only home) just means compiling as without the cache.
// Nothing evicts old entries (a few KiB to tens of KiB per program); delete
// the directory to clear it.
#ifndef TPUOFF_RUNTIME_EMULATOR_JIT_DISK_CACHE_H_
#define TPUOFF_RUNTIME_EMULATOR_JIT_DISK_CACHE_H_

#include <optional>
#include <string>
#include <string_view>

namespace tpuoff::runtime {

// The cache directory from the environment, or "" when there is none.
std::string JitCacheDirectory();

// 32 hex digits naming a key's file (and its function in the object).
std::string JitCacheName(std::string_view key);

// The object stored under `key` in `dir`, or nullopt when there is none
// usable (missing, unreadable, larger than 256 MiB, or not matching).
std::optional<std::string> LoadJitObject(const std::string& dir, std::string_view key);

// Stores `object` under `key` in `dir` (created if missing); false when it
// could not (the caller goes on without the cache).
bool StoreJitObject(const std::string& dir, std::string_view key, std::string_view object);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_JIT_DISK_CACHE_H_

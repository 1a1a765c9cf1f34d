// Fused loop programs (runtime/emulator/loop_program.h) compiled to machine
// code with LLVM's ORC JIT. The block interpreter evaluates a program one
// node at a time over blocks of up to kLoopBlock elements, storing every
// intermediate block; a compiled program evaluates the whole node graph on
// a few vector registers of elements at a time (16 f32 lanes each with
// AVX-512, 8 with AVX2; two to four registers per step, so independent
// chains overlap) and folds or stores the result straight away, as a
// hand-fused loop would.
//
// A compiled program is a drop-in for the interpreter, bit for bit: it is
// called for the same items (elements [c0, c0 + n) of one row of the
// iteration space) and reproduces every kernel's arithmetic exactly — the
// same IEEE operations in the same order, bf16 rounding after every bf16
// op, exp and log as runtime/cpu/simd_math.h computes them (with FMA where
// that build uses it), NaN-propagating max/min, XLA's integer and convert
// rules, and reductions folding element i of an item into lane i mod
// kFoldLanes in element order. Programs with anything it does not express
// (other element types or ops, strided loads, block-wide reduce
// accumulators) are not compiled and stay interpreted.
//
// Compiled code is cached per process by the program's structure (not its
// shapes or buffers), so a module run again, or another module with the
// same loops, compiles nothing; and on disk (runtime/emulator/
// jit_disk_cache.h), so a later process with the same loops loads their
// machine code instead of compiling it (TPUOFF_JIT_CACHE=off: no disk).
#ifndef TPUOFF_RUNTIME_EMULATOR_LOOP_JIT_H_
#define TPUOFF_RUNTIME_EMULATOR_LOOP_JIT_H_

#include <cstdint>

namespace tpuoff::runtime {

struct LoopProgram;

// One call of a compiled program: one item of a LoopExecution.
struct JitItem {
  // Per load node, in node order: the address of the element the item's
  // first lane reads (loads with minor stride 1 read n consecutive
  // elements; stride-0 loads read that one element).
  const uint8_t* const* loads = nullptr;
  // Per load node: an address to prefetch ahead, advanced like the load
  // (the same columns some rows later), or the load's own address.
  const uint8_t* const* prefetch = nullptr;
  const int64_t* idx = nullptr;  // the item's index along each non-minor dim
  int64_t c0 = 0;                // minor index of the first element
  int64_t n = 0;                 // elements, >= 1
  // Elementwise / update programs: where the first element is stored.
  // Reduce programs: the fold lanes, output o's kFoldLanes values (compute
  // representation) at byte offset o * kLoopBlock * 8.
  uint8_t* out = nullptr;
  // Reduce programs: what else the call does (kJit* bits), as
  // LoopExecution::ReduceChunk and FinishSegment would: start the lanes at
  // the reducers' identities (the item is a chunk's first); fold the lanes
  // pairwise into `partials` (one 8-byte slot per output; the chunk's last
  // item); combine the init value with that partial and store the result
  // at results[o] (the segment's only chunk).
  int64_t flags = 0;
  uint8_t* partials = nullptr;
  const uint8_t* const* inits = nullptr;
  uint8_t* const* results = nullptr;
  // The call runs this many items, one per row: item r is item 0 with
  // every load (and prefetch) address advanced by r * row_steps[load],
  // `out` by r * out_row_step (elementwise / update programs) and each
  // results[o] by r elements (reduce programs; every item a whole segment).
  // The same `flags`, `c0` and `n` for each; `idx` is not advanced, so
  // programs that read it (an iota along a row dimension) take one row a
  // call. One call over many rows saves the per-call work of short rows (a
  // 2048-column vocab tile).
  int64_t rows = 1;
  const int64_t* row_steps = nullptr;  // per load node, bytes
  int64_t out_row_step = 0;            // bytes
};
inline constexpr int64_t kJitInitLanes = 1;
inline constexpr int64_t kJitFinishChunk = 2;
inline constexpr int64_t kJitFinishSegment = 4;

using LoopItemFn = void (*)(const JitItem* item);

// When fused loops are compiled.
enum class LoopJitMode {
  kAuto,    // programs over many elements (compiling costs milliseconds)
  kAlways,  // every program it can express (tests)
  kNever,
};

// Whether this build has the JIT (LLVM was found) and it initialised.
bool LoopJitAvailable();

// Whether a program over `elements` iteration-space elements is compiled in
// `mode`. The TPUOFF_JIT environment variable (auto, always, never), when
// set, overrides kAuto.
bool ShouldJit(LoopJitMode mode, int64_t elements);

// The compiled program, from the cache or compiled now; nullptr when the
// program has something the JIT does not express, the JIT is unavailable,
// or compiling failed (the interpreter then runs it). `streaming_stores`:
// stores as non-temporal as LoopExecution would for this program.
LoopItemFn CompileLoopJit(const LoopProgram& program, bool streaming_stores);

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_LOOP_JIT_H_

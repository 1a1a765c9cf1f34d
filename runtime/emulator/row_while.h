// Row-interchanged while loops: a vocab tile loop ([B*T, V] walked tile by
// tile, every op of its body row-local) run rows-outer instead of
// iterations-outer. Run as written, each iteration reads a [rows, tile]
// slab: per row a 4 KiB run, the next one a whole row (300 KB at V=152K)
// away, so every run pays a TLB walk and a fresh hardware-prefetch ramp.
// Run rows-outer, a chunk of a few rows goes through every iteration before
// the next chunk starts, and each row is read front to back as a stream.
//
// How: while such a loop runs, the executor goes through its iterations as
// usual (the allocations, frees and HBM accounting are exactly the planned
// ones, and the small control steps — the counter, tile offsets, the
// condition — run at once), but each fused step that splits into the
// loop's R rows is queued (RowQueue) instead of run. At the end of the loop
// (or when something needs a queued result first) the queue runs: chunks of
// rows on the threads, each chunk through every queued execution in order.
//
// Why the result is the same bits: a queued execution writes, at row r, only
// row r of its output, and reads row r of every array a queued execution
// writes (reads of other rows, or of arrays nothing queued writes, are
// "shared"); so restricted to one chunk of rows, the queue is the same
// sequence of computations on the same values, and chunks touch disjoint
// data. Rows are computed whole, in their usual order (LoopExecution's
// RunUnits). What keeps it so:
//  - host memory of buffers freed while the queue is not empty is kept
//    until it has run (a later allocation never reuses it);
//  - small shared inputs (scalars: a tile offset, an init value) are copied
//    when queued, so control steps may overwrite them;
//  - any other step runs at once, after running the queue if it reads what
//    a queued execution writes or writes what one reads or writes; a queued
//    execution that would read another row of something queued writes, or
//    write something a queued execution reads shared, runs the queue first.
#ifndef TPUOFF_RUNTIME_EMULATOR_ROW_WHILE_H_
#define TPUOFF_RUNTIME_EMULATOR_ROW_WHILE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"
#include "hlo/analysis/buffer_plan.h"
#include "runtime/emulator/loop_program.h"

namespace tpuoff::runtime {

// Fused steps of at least this many elements decide a loop's rows.
inline constexpr int64_t kRowWhileMinElements = int64_t{1} << 20;

// Whether an instruction only aliases buffers whatever its operands (no
// data read or written): get-tuple-element, tuple, reshape, ...
bool OnlyAliases(const hlo::HloInstruction& x);

// Plan time: the rows R by which a while loop with this body and condition
// runs rows-outer, or 0. Every fused step of at least kRowWhileMinElements
// elements (one at least) must split into R rows (R >= 2: the product of
// its dimensions but the minor one; a reduce's kept dimensions); other
// steps must be fused or small (every array they touch at most 4 KiB) or
// only alias buffers. No calls, collectives or random numbers.
int64_t RowWhileRows(const hlo::ComputationPlan& body, const hlo::ComputationPlan& cond,
                     const std::function<const LoopProgram*(const hlo::Step&)>& program);

// Plan time: the step of `plan` at which the queue of the rows-outer while
// loop at step `while_step` starts, when the fused step producing part of
// the loop's initial state (the zero dlogits of a backward tile loop) comes
// right before it (only constants and aliases between) and splits into the
// loop's `rows`: queued with the loop, its stores that the loop overwrites
// are dropped. -1 when there is none.
int RowWhileFirstStep(const hlo::ComputationPlan& plan, int while_step, int64_t rows,
                      const std::function<const LoopProgram*(const hlo::Step&)>& program);

class RowQueue {
 public:
  // `stop`: polled between chunks when the queue runs (thread-safe); true
  // ends the run early (the caller then reports why).
  RowQueue(int64_t rows, int num_threads, std::function<bool()> stop);
  ~RowQueue();  // frees deferred host memory; what is queued never runs
  RowQueue(const RowQueue&) = delete;
  RowQueue& operator=(const RowQueue&) = delete;

  enum class Added { kQueued, kNotRowLocal, kRunQueueFirst };
  // Queues an execution of `program` (arrays as the executor passes them;
  // `input_elements` / `input_bytes` per input, 0 for constant data).
  // kNotRowLocal: it does not split into the queue's rows (run it now);
  // kRunQueueFirst: run the queue, then add it again.
  Added Add(const LoopProgram& program, const std::vector<const void*>& inputs,
            const std::vector<void*>& outputs, absl::Span<const int64_t> input_elements,
            absl::Span<const int64_t> input_bytes);
  // Whether a step run now that reads `reads` and writes `writes` (host
  // addresses of whole buffers) must wait for the queue.
  bool Conflicts(absl::Span<const void* const> reads,
                 absl::Span<const void* const> writes) const;
  // Host memory of a buffer freed while queued executions may use it:
  // released after the queue has run (nullptr is ignored).
  void DeferFree(void* data, int64_t bytes);
  // Whether the queue should run now to bound its memory.
  bool Full() const;
  int64_t queued() const { return static_cast<int64_t>(entries_.size()); }

  // Runs every queued execution over all rows (chunks of rows over the
  // threads, each chunk through the executions in order), then releases
  // deferred memory. False when `stop` ended it early.
  bool Run();

 private:
  struct Entry;
  void DropDeadStores();
  void ChoosePrefetchers();
  void Release();

  int64_t rows_;
  int num_threads_;
  std::function<bool()> stop_;
  std::vector<std::unique_ptr<Entry>> entries_;
  int64_t elements_ = 0;
  absl::flat_hash_set<const void*> writes_, own_reads_, shared_reads_;
  std::vector<void*> deferred_;
  int64_t deferred_bytes_ = 0;
};

}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_ROW_WHILE_H_

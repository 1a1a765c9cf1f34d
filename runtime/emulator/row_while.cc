#include "runtime/emulator/row_while.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include "absl/container/flat_hash_map.h"
#include "hlo/ir/opcode.h"
#include "hlo/ir/primitive_type.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/parallel.h"

namespace tpuoff::runtime {
namespace {

using hlo::ComputationPlan;
using hlo::HloInstruction;
using hlo::HloOpcode;
using hlo::Step;
using hlo::StepKind;

// Arrays a control step may touch (a counter, a tile offset, a condition).
constexpr int64_t kControlBytes = 4096;
// Shared inputs up to this size are copied when queued.
constexpr int64_t kSnapshotBytes = int64_t{64} << 10;
// Bytes of one chunk of rows across one queued execution, counted in the
// widest element type it reads or writes (64 rows of a 2048-wide bf16 vocab
// tile, 32 of an f32 one: in L2 for the passes of one iteration). Smaller
// chunks pay more per-call overhead (the seed shape's forward loop queues 11
// executions per iteration: 430 ms with 8K-element chunks, 265-310 ms from
// 64K to 256K); larger ones leave L2. Measured at the seed shape (AMD EPYC,
// AVX-512, 2026-11-30, `tpuoff bench --no-cold --reps=3`, twice each):
// 16K / 32K / 64K / 128K / 256K elements per chunk gave grpo_tiled f32
// 0.263-0.271 / 0.251-0.252 / 0.243-0.244 / 0.267-0.274 / 0.278-0.282 s and
// bf16 0.255-0.257 / 0.242-0.247 / 0.234-0.237 / 0.234-0.241 / 0.239-0.242 s.
constexpr int64_t kChunkBytes = int64_t{256} << 10;
// Below this many elements in all, one thread runs the queue.
constexpr int64_t kParallelElements = int64_t{1} << 15;
// The queue runs once it holds this many executions or this much deferred
// memory (a loop of very many iterations stays bounded).
constexpr int64_t kMaxEntries = 8192;
constexpr int64_t kMaxDeferredBytes = int64_t{256} << 20;

int64_t Product(const hlo::Shape& s, int64_t from, int64_t to) {
  int64_t p = 1;
  for (int64_t d = from; d < to; ++d) p *= s.dimensions(d);
  return p;
}

}  // namespace

bool OnlyAliases(const HloInstruction& x) {
  switch (x.opcode()) {
    case HloOpcode::kGetTupleElement:
    case HloOpcode::kTuple:
    case HloOpcode::kReshape:
    case HloOpcode::kBitcastConvert:
    case HloOpcode::kOptimizationBarrier:
    case HloOpcode::kAfterAll:
    case HloOpcode::kAddDependency:
    case HloOpcode::kDomain:
    case HloOpcode::kParameter:
      return true;
    default:
      return false;
  }
}

namespace {

bool SmallArrays(const hlo::Shape& shape) {
  for (const hlo::Shape& leaf : hlo::LeafShapes(shape)) {
    if (leaf.IsArray() && leaf.byte_size() > kControlBytes) return false;
  }
  return true;
}

// A step the loop may hold besides fused ones: aliases, or small control
// math on small arrays.
bool ControlStep(const Step& step) {
  if (step.kind != StepKind::kOp) return false;
  const HloInstruction& x = *step.instr;
  if (OnlyAliases(x)) return true;
  switch (x.opcode()) {
    case HloOpcode::kWhile:
    case HloOpcode::kCall:
    case HloOpcode::kFusion:
    case HloOpcode::kConditional:
    case HloOpcode::kCustomCall:
    case HloOpcode::kRng:
    case HloOpcode::kRngGetAndUpdateState:
    case HloOpcode::kRngBitGenerator:
      return false;
    default:
      break;
  }
  if (hlo::IsCollective(x.opcode())) return false;
  if (!SmallArrays(x.shape())) return false;
  for (const HloInstruction* o : x.operands()) {
    if (!SmallArrays(o->shape())) return false;
  }
  return true;
}

}  // namespace

int64_t RowWhileRows(const ComputationPlan& body, const ComputationPlan& cond,
                     const std::function<const LoopProgram*(const Step&)>& program) {
  int64_t rows = 0;
  for (const ComputationPlan* plan : {&body, &cond}) {
    for (const Step& step : plan->steps) {
      if (step.kind == StepKind::kLoop || step.kind == StepKind::kLoopReduce) {
        const LoopProgram* p = program(step);
        if (p == nullptr) return 0;
        if (p->shape.num_elements() < kRowWhileMinElements) continue;
        const int64_t rank = p->shape.rank();
        const int64_t r = p->reduce ? Product(p->shape, 0, p->num_kept_dims)
                                    : Product(p->shape, 0, std::max<int64_t>(rank - 1, 0));
        if (r < 2 || (rows != 0 && r != rows)) return 0;
        rows = r;
        continue;
      }
      if (!ControlStep(step)) return 0;
    }
  }
  return rows;
}

int RowWhileFirstStep(const ComputationPlan& plan, int while_step, int64_t rows,
                      const std::function<const LoopProgram*(const Step&)>& program) {
  const HloInstruction* w = plan.steps[while_step].instr;
  const HloInstruction* init = w->operand(0);
  if (init->opcode() != HloOpcode::kTuple) return -1;
  for (int j = while_step - 1; j >= 0; --j) {
    const Step& step = plan.steps[j];
    if (step.kind == StepKind::kOp &&
        (OnlyAliases(*step.instr) || (step.instr->opcode() == HloOpcode::kConstant &&
                                      SmallArrays(step.instr->shape())))) {
      continue;
    }
    if (step.kind != StepKind::kLoop || step.update) return -1;
    const LoopProgram* p = program(step);
    if (p == nullptr || p->reduce || p->update ||
        p->shape.num_elements() < kRowWhileMinElements) {
      return -1;
    }
    bool splits = false;
    for (int64_t k = 0; k <= p->shape.rank() && !splits; ++k) {
      splits = Product(p->shape, 0, k) == rows;
    }
    const auto& ops = init->operands();
    if (!splits || std::find(ops.begin(), ops.end(), step.instr) == ops.end()) return -1;
    return j;
  }
  return -1;
}

struct RowQueue::Entry {
  std::vector<const void*> inputs;  // the execution reads them through a span
  std::vector<void*> outputs;
  std::unique_ptr<LoopExecution> execution;
  int64_t units = 0;  // per row
  std::vector<bool> own_row;  // per input: data read only at its own row
  int64_t element_bytes = 4;  // the widest element it reads by row or writes
  // An elementwise execution whose output later queued updates overwrite in
  // part before anything reads it: only these runs of each row
  // (units [begin, end) within the row) are computed.
  bool partial = false;
  std::vector<std::pair<int64_t, int64_t>> runs;
};

namespace {

// Runs of [0, length) not covered by `covered` (half-open, any order).
std::vector<std::pair<int64_t, int64_t>> Uncovered(
    std::vector<std::pair<int64_t, int64_t>> covered, int64_t length) {
  std::sort(covered.begin(), covered.end());
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t at = 0;
  for (const auto& [b, e] : covered) {
    if (b > at) out.emplace_back(at, std::min(b, length));
    at = std::max(at, e);
    if (at >= length) break;
  }
  if (at < length) out.emplace_back(at, length);
  return out;
}

}  // namespace

// Dead stores: an elementwise execution (the zero dlogits a tile loop then
// overwrites tile by tile) computes only the columns of each row that no
// later queued update overwrites before a queued execution reads the array.
// Whatever runs outside the queue reads it only after the queue has run.
void RowQueue::DropDeadStores() {
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = *entries_[i];
    // Only outputs worth it (a [B*T, V] fill): the scan below is over the
    // later executions.
    if (!e.execution->is_elementwise() || e.outputs.size() != 1 ||
        e.execution->elements() < kRowWhileMinElements) {
      continue;
    }
    const void* out = e.outputs[0];
    std::vector<std::pair<int64_t, int64_t>> covered;
    for (size_t j = i + 1; j < entries_.size(); ++j) {
      const Entry& later = *entries_[j];
      if (std::find(later.inputs.begin(), later.inputs.end(), out) != later.inputs.end()) break;
      if (std::find(later.outputs.begin(), later.outputs.end(), out) == later.outputs.end()) {
        continue;
      }
      int64_t b = 0, end = 0;
      if (!later.execution->UpdateRowSpan(rows_, &b, &end)) break;
      covered.emplace_back(b, end);
    }
    if (covered.empty()) continue;
    e.runs = Uncovered(std::move(covered), e.units);
    e.partial = true;
  }
}

RowQueue::RowQueue(int64_t rows, int num_threads, std::function<bool()> stop)
    : rows_(rows), num_threads_(num_threads), stop_(std::move(stop)) {}

RowQueue::~RowQueue() { Release(); }

RowQueue::Added RowQueue::Add(const LoopProgram& program, const std::vector<const void*>& inputs,
                              const std::vector<void*>& outputs,
                              absl::Span<const int64_t> input_elements,
                              absl::Span<const int64_t> input_bytes) {
  std::vector<bool> own_row;
  int64_t units = 0;
  {
    const LoopExecution probe(program, inputs, outputs);
    units = probe.SplitRows(rows_, input_elements, &own_row);
  }
  if (units == 0) return Added::kNotRowLocal;
  auto is_data = [&](size_t i) {
    return inputs[i] != nullptr && i < input_bytes.size() && input_bytes[i] > 0;
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (is_data(i) && !own_row[i] && writes_.contains(inputs[i])) return Added::kRunQueueFirst;
  }
  for (void* out : outputs) {
    if (shared_reads_.contains(out)) return Added::kRunQueueFirst;
  }
  auto entry = std::make_unique<Entry>();
  entry->inputs = inputs;
  entry->outputs = outputs;
  entry->units = units;
  for (size_t i = 0; i < inputs.size(); ++i) entry->own_row.push_back(is_data(i) && own_row[i]);
  entry->element_bytes = std::max<int64_t>(1, hlo::ByteWidth(program.out_type));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (entry->own_row[i] && i < input_elements.size() && input_elements[i] > 0) {
      entry->element_bytes = std::max(entry->element_bytes, input_bytes[i] / input_elements[i]);
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!is_data(i)) continue;
    if (own_row[i]) {
      own_reads_.insert(inputs[i]);
    } else if (input_bytes[i] <= kSnapshotBytes) {
      void* copy = HostAlloc(static_cast<size_t>(input_bytes[i]));
      if (copy == nullptr) throw std::bad_alloc();
      std::memcpy(copy, inputs[i], static_cast<size_t>(input_bytes[i]));
      deferred_.push_back(copy);
      deferred_bytes_ += input_bytes[i];
      entry->inputs[i] = copy;
    } else {
      shared_reads_.insert(inputs[i]);
    }
  }
  for (void* out : outputs) writes_.insert(out);
  entry->execution = std::make_unique<LoopExecution>(program, entry->inputs, entry->outputs);
  elements_ += entry->execution->elements();
  entries_.push_back(std::move(entry));
  return Added::kQueued;
}

bool RowQueue::Conflicts(absl::Span<const void* const> reads,
                         absl::Span<const void* const> writes) const {
  if (entries_.empty()) return false;
  for (const void* r : reads) {
    if (r != nullptr && writes_.contains(r)) return true;
  }
  for (const void* w : writes) {
    if (w != nullptr &&
        (writes_.contains(w) || own_reads_.contains(w) || shared_reads_.contains(w))) {
      return true;
    }
  }
  return false;
}

void RowQueue::DeferFree(void* data, int64_t bytes) {
  if (data == nullptr) return;
  deferred_.push_back(data);
  deferred_bytes_ += bytes;
}

bool RowQueue::Full() const {
  return static_cast<int64_t>(entries_.size()) >= kMaxEntries ||
         deferred_bytes_ >= kMaxDeferredBytes;
}

// Which queued executions prefetch the next run of the arrays they read row
// by row: for each array, the ones with the most work per element among
// its readers. A tile loop's iteration passes over the same run of a row
// several times (a max, then the exp-sums): all of them prefetching the
// next run puts every prefetch into the first, cheapest pass, which then
// waits on memory while the heavy pass after it computes from cache. The
// heaviest pass issues them spread over its own longer time instead.
// Measured at the seed shape (AMD EPYC with AVX-512, 2026-11-29, `tpuoff
// bench --no-cold --reps=5`, three alternations against every pass
// prefetching): entropy_tiled f32 0.130 / 0.138 / 0.139 s against 0.153 /
// 0.152 / 0.153, bf16 0.127 s against 0.130-0.131; grpo_tiled bf16 0.284 /
// 0.300 / 0.286 against 0.295 / 0.300 / 0.300, f32 within noise.
void RowQueue::ChoosePrefetchers() {
  absl::flat_hash_map<const void*, int64_t> heaviest;
  for (const auto& e : entries_) {
    for (size_t i = 0; i < e->inputs.size(); ++i) {
      if (!e->own_row[i]) continue;
      int64_t& w = heaviest[e->inputs[i]];
      w = std::max(w, e->execution->body_nodes());
    }
  }
  for (const auto& e : entries_) {
    std::vector<bool> next_run(e->inputs.size(), false);
    for (size_t i = 0; i < e->inputs.size(); ++i) {
      next_run[i] = e->own_row[i] && e->execution->body_nodes() >= heaviest[e->inputs[i]];
    }
    e->execution->PrefetchNextRun(next_run);
  }
}

bool RowQueue::Run() {
  std::atomic<bool> stopped{false};
  if (!entries_.empty()) {
    DropDeadStores();
    ChoosePrefetchers();
    const int threads = elements_ < kParallelElements ? 1 : std::max(1, num_threads_);
    auto row_elements = [&](const Entry& e) {
      if (!e.partial) return e.execution->elements() / rows_;
      int64_t n = 0;
      for (const auto& [b, end] : e.runs) n += end - b;
      return n;
    };
    // Leading executions with rows wider than a chunk (a whole [B*T, V]
    // array) run whole first, as written, instead of setting the chunk to
    // one row.
    size_t first = 0;
    for (; first < entries_.size(); ++first) {
      const Entry& e = *entries_[first];
      if (e.partial || row_elements(e) * e.element_bytes <= kChunkBytes) break;
      if (stop_ && stop_()) {
        stopped = true;
        break;
      }
      e.execution->Run(threads);
    }
    int64_t widest = 1;  // bytes of one row
    for (size_t k = first; k < entries_.size(); ++k) {
      widest = std::max(widest, row_elements(*entries_[k]) * entries_[k]->element_bytes);
    }
    // At least four chunks per thread, so that the threads end together.
    const int64_t per_chunk = std::clamp<int64_t>(
        std::min(kChunkBytes / widest, rows_ / (4 * threads)), 1, rows_);
    const int64_t chunks = (rows_ + per_chunk - 1) / per_chunk;
    if (!stopped && first < entries_.size()) {
      ParallelFor(threads, chunks, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
          if (stopped.load(std::memory_order_relaxed)) return;
          if (stop_ && stop_()) {
            stopped.store(true, std::memory_order_relaxed);
            return;
          }
          const int64_t r0 = c * per_chunk;
          const int64_t r1 = std::min(rows_, r0 + per_chunk);
          for (size_t k = first; k < entries_.size(); ++k) {
            const Entry& e = *entries_[k];
            if (!e.partial) {
              e.execution->RunUnits(r0 * e.units, r1 * e.units);
              continue;
            }
            for (int64_t r = r0; r < r1; ++r) {
              for (const auto& [b, run_end] : e.runs) {
                e.execution->RunUnits(r * e.units + b, r * e.units + run_end);
              }
            }
          }
        }
      });
    }
  }
  entries_.clear();
  writes_.clear();
  own_reads_.clear();
  shared_reads_.clear();
  elements_ = 0;
  Release();
  return !stopped.load();
}

void RowQueue::Release() {
  for (void* p : deferred_) HostFree(p);
  deferred_.clear();
  deferred_bytes_ = 0;
}

}  // namespace tpuoff::runtime

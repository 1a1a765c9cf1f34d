#include "runtime/emulator/row_chain.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "runtime/cpu/parallel.h"

namespace tpuoff::runtime {
namespace {

using hlo::ComputationPlan;
using hlo::HloInstruction;
using hlo::Step;
using hlo::StepKind;

// Elements of one chunk of rows across a step (64K f32 = 256 KiB: a few
// rows of a vocab tile, or one row of a 152K vocabulary, stay in L2).
constexpr int64_t kChunkElements = int64_t{1} << 16;
// Below this many elements in all, one thread runs the chain.
constexpr int64_t kParallelElements = int64_t{1} << 15;

int64_t Product(const hlo::Shape& s, int64_t from, int64_t to) {
  int64_t p = 1;
  for (int64_t d = from; d < to; ++d) p *= s.dimensions(d);
  return p;
}

// How a step splits into `rows` rows: sets the number of leading (row)
// dimensions of its iteration space and returns its units per row; 0 when
// it cannot.
int64_t UnitsPerRow(const Step& step, const LoopProgram& p, int64_t rows, int64_t* row_dims) {
  const int64_t rank = p.shape.rank();
  if (step.kind == StepKind::kLoopReduce) {
    if (!p.reduce || Product(p.shape, 0, p.num_kept_dims) != rows) return 0;
    *row_dims = p.num_kept_dims;
    return 1;
  }
  if (step.kind != StepKind::kLoop || step.update || p.update || p.reduce) return 0;
  for (int64_t k = 0; k <= rank; ++k) {
    if (Product(p.shape, 0, k) == rows) {
      *row_dims = k;
      return Product(p.shape, k, rank);
    }
  }
  return 0;
}

// Whether load `n` of a program with `row_dims` row dimensions reads, at
// row r, only elements [r*L, (r+1)*L) of its array of rows * L elements.
bool ReadsOwnRow(const LoopNode& n, const hlo::Shape& space, int64_t row_dims,
                 int64_t array_elements, int64_t rows) {
  if (!n.dynamic.empty() || n.offset != 0 || rows <= 0 || array_elements % rows != 0) {
    return false;
  }
  return AccessesOwnRow(space, row_dims, n.strides, 0, array_elements / rows);
}

// A constant materialised into its own buffer (e.g. a reduce's init value
// inside a loop body): it reads nothing, so the executor writes it before
// the chain runs.
bool IsConstant(const Step& step) {
  return step.kind == StepKind::kOp && step.instr->opcode() == hlo::HloOpcode::kConstant;
}

class ChainFinder {
 public:
  ChainFinder(const ComputationPlan& plan,
              const std::function<const LoopProgram*(const Step&)>& program)
      : plan_(plan), program_(program) {}

  // Fills `chain` (first, last, rows set) when steps first..last can run as
  // one chain with a reduce among them.
  bool Check(RowChain* chain) const {
    const int64_t rows = chain->rows;
    absl::flat_hash_set<int> written;
    bool has_reduce = false;
    for (int i = chain->first; i <= chain->last; ++i) {
      const Step& step = plan_.steps[i];
      if (IsConstant(step)) continue;
      if (program_(step) == nullptr) return false;
      has_reduce |= step.kind == StepKind::kLoopReduce;
      for (const HloInstruction* r : step.roots) {
        for (int id : plan_.leaves.at(r)) written.insert(id);
      }
      for (int id : plan_.leaves.at(step.instr)) written.insert(id);
      if (step.in_place_of != hlo::kNoBuffer) written.insert(step.in_place_of);
    }
    if (!has_reduce) return false;
    chain->units_per_row.clear();
    chain->elements = 0;
    int64_t max_row_elements = 1;
    for (int i = chain->first; i <= chain->last; ++i) {
      const Step& step = plan_.steps[i];
      if (IsConstant(step)) continue;
      const LoopProgram& p = *program_(step);
      int64_t row_dims = 0;
      const int64_t units = UnitsPerRow(step, p, rows, &row_dims);
      if (units == 0) return false;
      chain->units_per_row.push_back(units);
      const int64_t elements = p.shape.num_elements();
      chain->elements += elements;
      max_row_elements = std::max(max_row_elements, elements / rows);
      auto inside = [&](int input) {
        const HloInstruction* x = p.inputs[input];
        if (x == nullptr) return false;  // constant data
        auto it = plan_.leaves.find(x);
        if (it == plan_.leaves.end()) return true;  // unknown: assume the worst
        for (int id : it->second) {
          if (written.contains(id)) return true;
        }
        return false;
      };
      for (const LoopNode& n : p.nodes) {
        for (const DynamicStart& d : n.dynamic) {
          if (inside(d.input)) return false;
        }
        if (n.kind == LoopNode::Kind::kLoad && inside(n.input) &&
            !ReadsOwnRow(n, p.shape, row_dims, p.inputs[n.input]->shape().num_elements(),
                         rows)) {
          return false;
        }
      }
      for (const LoopReduceOutput& o : p.reduce_outputs) {
        if (inside(o.init_input)) return false;
      }
    }
    chain->rows_per_chunk = std::clamp<int64_t>(kChunkElements / max_row_elements, 1, rows);
    return true;
  }

  std::vector<RowChain> Find() const {
    std::vector<RowChain> chains;
    const int n = plan_.num_steps();
    int start = 0;  // steps before it belong to an earlier chain
    for (int i = 0; i < n; ++i) {
      const Step& step = plan_.steps[i];
      const LoopProgram* p = program_(step);
      if (step.kind != StepKind::kLoopReduce || p == nullptr || !p->reduce) continue;
      RowChain chain;
      chain.rows = Product(p->shape, 0, p->num_kept_dims);
      if (chain.rows < 2) continue;
      chain.first = chain.last = i;
      RowChain longer = chain;
      while (longer.first > start && (--longer.first, Check(&longer))) chain = longer;
      longer = chain;
      while (longer.last + 1 < n && (++longer.last, Check(&longer))) chain = longer;
      // Worth it only with two or more fused steps (not one and constants).
      if (Check(&chain) && chain.units_per_row.size() >= 2) {
        chains.push_back(chain);
        i = chain.last;
        start = chain.last + 1;
      }
    }
    return chains;
  }

 private:
  const ComputationPlan& plan_;
  const std::function<const LoopProgram*(const Step&)>& program_;
};

}  // namespace

std::vector<RowChain> FindRowChains(
    const ComputationPlan& plan,
    const std::function<const LoopProgram*(const Step&)>& program) {
  return ChainFinder(plan, program).Find();
}

void RunRowChain(const RowChain& chain, const std::vector<LoopExecution>& steps,
                 int num_threads) {
  const int64_t chunks = (chain.rows + chain.rows_per_chunk - 1) / chain.rows_per_chunk;
  const int threads = chain.elements < kParallelElements ? 1 : num_threads;
  ParallelFor(threads, chunks, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const int64_t r0 = c * chain.rows_per_chunk;
      const int64_t r1 = std::min(chain.rows, r0 + chain.rows_per_chunk);
      for (size_t k = 0; k < steps.size(); ++k) {
        const int64_t u = chain.units_per_row[k];
        steps[k].RunUnits(r0 * u, r1 * u);
      }
    }
  });
}

}  // namespace tpuoff::runtime

#include "runtime/emulator/loop_jit.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/cpu/fold_kernels.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/emulator/loop_program.h"

#if defined(TPUOFF_HAVE_JIT)
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/Host.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "runtime/emulator/jit_disk_cache.h"
#include "runtime/emulator/loop_jit_ops.h"
#endif

namespace tpuoff::runtime {
namespace {

// kAuto compiles programs over at least this many elements: compiling
// takes milliseconds, which such a loop repays in one run.
constexpr int64_t kJitMinElements = int64_t{1} << 18;

// TPUOFF_JIT: -1 unset, else the mode it names.
int EnvMode() {
  static const int mode = [] {
    const char* e = std::getenv("TPUOFF_JIT");
    if (e == nullptr) return -1;
    const std::string s(e);
    if (s == "always") return static_cast<int>(LoopJitMode::kAlways);
    if (s == "never") return static_cast<int>(LoopJitMode::kNever);
    return static_cast<int>(LoopJitMode::kAuto);
  }();
  return mode;
}

}  // namespace

bool ShouldJit(LoopJitMode mode, int64_t elements) {
  if (mode == LoopJitMode::kAuto && EnvMode() >= 0) mode = static_cast<LoopJitMode>(EnvMode());
  switch (mode) {
    case LoopJitMode::kAlways: return true;
    case LoopJitMode::kNever: return false;
    case LoopJitMode::kAuto: return elements >= kJitMinElements;
  }
  return false;
}

#if !defined(TPUOFF_HAVE_JIT)

bool LoopJitAvailable() { return false; }
LoopItemFn CompileLoopJit(const LoopProgram&, bool) { return nullptr; }

#else

namespace {

using hlo::HloOpcode;
using hlo::PrimitiveType;
using jit::OpEmitter;
using llvm::Value;

// Whether a load node reads n consecutive elements (not one).
bool Streams(const LoopProgram& p, const LoopNode& n) { return !n.invariant; }
int64_t MinorStride(const LoopProgram& p, const LoopNode& n) {
  const int64_t rank = p.shape.rank();
  return rank ? n.strides[rank - 1] : 0;
}
// Loads the caller prefetches ahead for (LoopExecution: contiguous rows of
// a rank >= 2 iteration space).
bool Prefetched(const LoopProgram& p, const LoopNode& n) {
  return Streams(p, n) && MinorStride(p, n) == 1 && p.shape.rank() >= 2;
}

bool JitReducer(HloOpcode op, PrimitiveType t) {
  if (t == PrimitiveType::kF32 || t == PrimitiveType::kBF16) {
    return op == HloOpcode::kAdd || op == HloOpcode::kMultiply || op == HloOpcode::kMaximum ||
           op == HloOpcode::kMinimum;
  }
  return (t == PrimitiveType::kS32 || t == PrimitiveType::kU32) &&
         (op == HloOpcode::kAdd || op == HloOpcode::kMultiply || op == HloOpcode::kMaximum ||
          op == HloOpcode::kMinimum || op == HloOpcode::kAnd || op == HloOpcode::kOr ||
          op == HloOpcode::kXor);
}

// Whether the JIT expresses every part of `p`.
bool Expressible(const LoopProgram& p) {
  const int64_t rank = p.shape.rank();
  if (rank == 0 || p.nodes.empty()) return false;
  if (p.update && p.update_base_input >= 0) return false;  // reads what it writes
  for (const LoopNode& n : p.nodes) {
    if (!jit::IsJitType(n.type)) return false;
    auto arg_type = [&](int k) { return p.nodes[n.args[k]].type; };
    switch (n.kind) {
      case LoopNode::Kind::kLoad:
        if (!n.invariant && MinorStride(p, n) != 1) return false;
        break;
      case LoopNode::Kind::kIota:
        if (n.type == PrimitiveType::kPred) return false;
        break;
      case LoopNode::Kind::kUnary:
        if (!OpEmitter::HasUnary(n.opcode, n.type)) return false;
        break;
      case LoopNode::Kind::kBinary:
        if (!OpEmitter::HasBinary(n.opcode, n.type)) return false;
        break;
      case LoopNode::Kind::kCompare:
        if (!jit::IsJitType(arg_type(0))) return false;
        break;
      case LoopNode::Kind::kConvert:
        if (n.opcode != HloOpcode::kConvert || !OpEmitter::HasConvert(arg_type(0), n.type)) {
          return false;
        }
        break;
      case LoopNode::Kind::kIsFinite:
        if (arg_type(0) != PrimitiveType::kF32 && arg_type(0) != PrimitiveType::kBF16) {
          return false;
        }
        break;
      case LoopNode::Kind::kSelect:
        break;
      case LoopNode::Kind::kClamp:
        if (n.type == PrimitiveType::kPred) return false;
        break;
      case LoopNode::Kind::kIotaEq:
        if (arg_type(0) != PrimitiveType::kS32 && arg_type(0) != PrimitiveType::kU32) {
          return false;
        }
        break;
      case LoopNode::Kind::kExpShift:
        break;
    }
  }
  if (p.reduce) {
    for (const LoopReduceOutput& o : p.reduce_outputs) {
      if (o.fold == nullptr || !JitReducer(o.op, o.type)) return false;
      if (o.fold_product != nullptr && o.type != PrimitiveType::kF32) return false;
    }
    return true;
  }
  return p.root >= 0 && jit::IsJitType(p.out_type) &&
         (p.nodes[p.root].type == p.out_type ||
          (p.out_type == PrimitiveType::kBF16 && p.nodes[p.root].type == PrimitiveType::kF32));
}

// What the generated code depends on: the cache key.
std::string Signature(const LoopProgram& p, bool streaming, int lanes) {
  std::string s = absl::StrCat("w", lanes, simd::kFusedMultiplyAdd ? "f" : "n",
                               streaming ? "s" : "", p.reduce ? "R" : p.update ? "U" : "E",
                               p.shape.rank(), ":", static_cast<int>(p.out_type), ":", p.root,
                               "|");
  for (const LoopNode& n : p.nodes) {
    absl::StrAppend(&s, static_cast<int>(n.kind), ",", static_cast<int>(n.type), ",",
                    static_cast<int>(n.opcode), ",", n.args[0], ",", n.args[1], ",", n.args[2],
                    ",", n.invariant, n.negate, n.total_order, ",",
                    static_cast<int>(n.direction), ",", n.iota_dim, ",",
                    static_cast<int>(n.iota_type));
    if (n.kind == LoopNode::Kind::kLoad) absl::StrAppend(&s, ",", Prefetched(p, n));
    s += ';';
  }
  for (const LoopReduceOutput& o : p.reduce_outputs) {
    absl::StrAppend(&s, "|", o.node, ",", static_cast<int>(o.op), ",", static_cast<int>(o.type),
                    ",", o.fold_select != nullptr, o.fold_product != nullptr, ",", o.args[0],
                    ",", o.args[1], ",", o.args[2]);
  }
  return s;
}

// Emits the item function of one program.
class ProgramCodegen {
 public:
  ProgramCodegen(const LoopProgram& p, bool streaming, int lanes, int register_lanes,
                 bool bf16_convert, llvm::Module* m)
      : p_(p), streaming_(streaming), lanes_(lanes), register_lanes_(register_lanes), m_(m),
        b_(m->getContext()),
        ops_(&b_, simd::kFusedMultiplyAdd, bf16_convert) {}

  bool Emit(const std::string& name);

 private:
  // Lanes [i, i + width) of an item.
  struct Group {
    int width = 1;
    Value* i = nullptr;  // i64
    std::vector<Value*> vals;
  };

  llvm::Type* Ty(PrimitiveType t) { return ops_.ComputeType(t); }
  llvm::Type* Shaped(llvm::Type* scalar, int width) {
    return width == 1 ? scalar : llvm::FixedVectorType::get(scalar, width);
  }
  llvm::Value* BytePtr(llvm::Value* base, llvm::Value* byte_offset) {
    return b_.CreateGEP(b_.getInt8Ty(), base, byte_offset);
  }
  llvm::Value* TypedPtr(llvm::Value* p, llvm::Type* t) {
    return b_.CreateBitCast(p, llvm::PointerType::getUnqual(t));
  }
  llvm::Value* LoadAt(llvm::Type* t, llvm::Value* byte_ptr) {
    return b_.CreateAlignedLoad(t, TypedPtr(byte_ptr, t), llvm::MaybeAlign(1));
  }
  // Node `a`'s value for group g (invariants splatted).
  Value* Arg(int a, const Group& g) {
    if (p_.nodes[a].invariant) return ops_.Widen(inv_[a], g.width);
    return g.vals[a];
  }
  std::optional<Value*> EmitOp(const LoopNode& n, const std::function<Value*(int)>& arg);
  bool EmitInvariants();
  bool EmitNode(int k, Group* g);
  bool EmitGroup(Group* g);
  // The reduce output o's folded value for group g.
  Value* FoldValue(const LoopReduceOutput& o, const Group& g, Value* acc);
  void Prefetch(Value* i);
  // The one-hot split of an elementwise loop: body() emitted twice behind a
  // branch on whether any kIotaEq node's column falls in [i, i + span) — as
  // written where it does (rare: one column of a row), and with every
  // kIotaEq node known false (true when negated) where it does not, so that
  // the compares and the selects they feed drop out of the common copy (the
  // backward update's loop: 165 -> 153 instructions per 64 elements).
  // body() returns the values to store, which the split returns merged.
  // Programs without kIotaEq nodes: body() once. (Reduce loops are not
  // split: there the second copy cost more in spills than the compares.)
  std::vector<Value*> OneHotSplit(Value* i, int64_t span,
                                  const std::function<std::vector<Value*>()>& body);
  // for (i = start; cond(i); i += step) body(i): returns the final i.
  Value* Loop(Value* start, const std::function<Value*(Value*)>& cond, int64_t step,
              const std::function<void(Value*)>& body);
  bool EmitReduce();
  bool EmitMinMaxPass(int j0, int gw, int per_pass, Value* full, const std::vector<Value*>& acc,
                      llvm::BasicBlock* done, std::vector<Value*>* fast_acc,
                      llvm::BasicBlock** fast_end);
  bool EmitElementwise();

  const LoopProgram& p_;
  bool streaming_;
  int lanes_;
  int register_lanes_;  // f32 lanes of one vector register of this CPU
  llvm::Module* m_;
  llvm::IRBuilder<> b_;
  OpEmitter ops_;
  llvm::Function* fn_ = nullptr;
  std::vector<Value*> inv_;        // invariant node values (scalars)
  std::vector<Value*> hot_;        // kIotaEq nodes: the item's one-hot index (i32)
  std::vector<Value*> load_ptr_;   // per node (loads): the item's first element
  std::vector<Value*> pf_ptr_;     // per node (prefetched loads)
  Value* idx_ = nullptr;           // i64*
  Value* c0_ = nullptr;
  Value* n_ = nullptr;
  Value* out_ = nullptr;           // i8*
  Value* flags_ = nullptr;         // reduce programs: JitItem::flags ...
  Value* partials_ = nullptr;
  Value* inits_ = nullptr;
  Value* results_ = nullptr;
  Value* row_ = nullptr;           // i64: the call's row (JitItem::rows)
  bool hot_off_ = false;           // emitting OneHotSplit's common copy
  // The reducer's identity for output o, a scalar of its compute type.
  Value* Identity(const LoopReduceOutput& o);
  void EmitFinish();
};

Value* ProgramCodegen::Loop(Value* start, const std::function<Value*(Value*)>& cond,
                            int64_t step, const std::function<void(Value*)>& body) {
  llvm::LLVMContext& c = b_.getContext();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::BasicBlock* head = llvm::BasicBlock::Create(c, "head", fn_);
  llvm::BasicBlock* loop = llvm::BasicBlock::Create(c, "loop", fn_);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(c, "done", fn_);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2);
  i->addIncoming(start, pre);
  b_.CreateCondBr(cond(i), loop, done);
  b_.SetInsertPoint(loop);
  body(i);
  Value* next = b_.CreateAdd(i, b_.getInt64(step));
  i->addIncoming(next, b_.GetInsertBlock());
  b_.CreateBr(head);
  b_.SetInsertPoint(done);
  return i;
}

// The node kinds computed alike on invariant scalars and on vectors of
// elements: `arg(a)` is operand a's value. nullopt: a kind this function
// does not emit, or an op the JIT does not express.
std::optional<Value*> ProgramCodegen::EmitOp(const LoopNode& n,
                                             const std::function<Value*(int)>& arg) {
  switch (n.kind) {
    case LoopNode::Kind::kUnary: return ops_.Unary(n.opcode, n.type, arg(0));
    case LoopNode::Kind::kBinary: return ops_.Binary(n.opcode, n.type, arg(0), arg(1));
    case LoopNode::Kind::kCompare:
      return ops_.Compare(n.direction, n.total_order, p_.nodes[n.args[0]].type, arg(0), arg(1));
    case LoopNode::Kind::kConvert: return ops_.Convert(p_.nodes[n.args[0]].type, n.type, arg(0));
    case LoopNode::Kind::kIsFinite: return ops_.IsFinite(arg(0));
    case LoopNode::Kind::kSelect: return b_.CreateSelect(arg(0), arg(1), arg(2));
    case LoopNode::Kind::kClamp: return ops_.Clamp(n.type, arg(0), arg(1), arg(2));
    default: return std::nullopt;
  }
}

bool ProgramCodegen::EmitInvariants() {
  const int64_t rank = p_.shape.rank();
  hot_.assign(p_.nodes.size(), nullptr);
  for (size_t k = 0; k < p_.nodes.size(); ++k) {
    const LoopNode& n = p_.nodes[k];
    if (n.kind == LoopNode::Kind::kIotaEq) {  // its value is invariant, computed above
      const bool is_unsigned = p_.nodes[n.args[0]].type == PrimitiveType::kU32;
      Value* value = inv_[n.args[0]];
      Value* at = is_unsigned ? b_.CreateZExt(value, b_.getInt64Ty())
                              : b_.CreateSExt(value, b_.getInt64Ty());
      Value* rel = b_.CreateSub(at, c0_);
      hot_[k] = b_.CreateSelect(b_.CreateICmpULT(rel, n_), b_.CreateTrunc(rel, b_.getInt32Ty()),
                                b_.getInt32(-1));
    }
    if (!n.invariant) continue;
    Value* v = nullptr;
    auto arg = [&](int a) { return inv_[n.args[a]]; };
    switch (n.kind) {
      case LoopNode::Kind::kLoad:
        v = ops_.FromStorage(n.type, LoadAt(ops_.StorageType(n.type), load_ptr_[k]));
        break;
      case LoopNode::Kind::kIota: {
        Value* at = b_.getInt64(0);
        if (n.iota_dim < rank - 1) {
          at = b_.CreateLoad(b_.getInt64Ty(),
                             b_.CreateGEP(b_.getInt64Ty(), idx_, b_.getInt64(n.iota_dim)));
        }
        v = ops_.IotaValue(n.type, at);
        break;
      }
      default: {
        // kIotaEq and kExpShift never are invariant.
        std::optional<Value*> r = EmitOp(n, arg);
        if (!r) return false;
        v = *r;
      }
    }
    inv_[k] = v;
  }
  return true;
}

bool ProgramCodegen::EmitNode(int k, Group* g) {
  const LoopNode& n = p_.nodes[k];
  const int w = g->width;
  auto arg = [&](int a) { return Arg(n.args[a], *g); };
  Value* v = nullptr;
  switch (n.kind) {
    case LoopNode::Kind::kLoad: {
      llvm::Type* st = ops_.StorageType(n.type);
      Value* off = b_.CreateMul(g->i, b_.getInt64(hlo::ByteWidth(n.type)));
      v = ops_.FromStorage(n.type, LoadAt(Shaped(st, w), BytePtr(load_ptr_[k], off)));
      break;
    }
    case LoopNode::Kind::kIota: {
      Value* start = b_.CreateAdd(c0_, g->i);
      if (w > 1) {
        std::vector<llvm::Constant*> lanes;
        for (int l = 0; l < w; ++l) lanes.push_back(b_.getInt64(l));
        start = b_.CreateAdd(ops_.Widen(start, w), llvm::ConstantVector::get(lanes));
      }
      v = ops_.IotaValue(n.type, start);
      break;
    }
    case LoopNode::Kind::kIotaEq: {
      // Element i of the item is the one-hot column when i == hot (the
      // value's column minus c0, or -1 when outside the item: i < n <=
      // kLoopBlock fits i32).
      Value* hot = hot_[k];
      if (hot_off_) {  // no element of this group is the column
        v = ops_.Widen(b_.getInt1(n.negate), w);
        break;
      }
      if (w == 1) {
        v = b_.CreateICmpEQ(b_.CreateTrunc(g->i, b_.getInt32Ty()), hot);
      } else {
        std::vector<llvm::Constant*> lanes;
        for (int l = 0; l < w; ++l) lanes.push_back(b_.getInt32(l));
        Value* at = b_.CreateAdd(ops_.Widen(b_.CreateTrunc(g->i, b_.getInt32Ty()), w),
                                 llvm::ConstantVector::get(lanes));
        v = b_.CreateICmpEQ(at, ops_.Widen(hot, w));
      }
      if (n.negate) v = b_.CreateNot(v);
      break;
    }
    case LoopNode::Kind::kExpShift: {
      Value* s = inv_[n.args[1]];
      if (n.negate) s = b_.CreateFNeg(s);
      v = ops_.Exp(b_.CreateFSub(arg(0), ops_.Widen(s, w)));
      break;
    }
    default: {
      std::optional<Value*> r = EmitOp(n, arg);
      if (!r) return false;
      v = *r;
    }
  }
  g->vals[k] = v;
  return true;
}

bool ProgramCodegen::EmitGroup(Group* g) {
  g->vals.assign(p_.nodes.size(), nullptr);
  for (size_t k = 0; k < p_.nodes.size(); ++k) {
    if (!p_.nodes[k].invariant && !EmitNode(static_cast<int>(k), g)) return false;
  }
  return true;
}

Value* ProgramCodegen::FoldValue(const LoopReduceOutput& o, const Group& g, Value* acc) {
  Value* v = nullptr;
  if (o.fold_select != nullptr) {
    v = b_.CreateSelect(Arg(o.args[0], g), Arg(o.args[1], g), Arg(o.args[2], g));
  } else if (o.fold_product != nullptr) {
    return b_.CreateFAdd(acc, b_.CreateFMul(Arg(o.args[0], g), Arg(o.args[1], g)));
  } else {
    v = Arg(o.node, g);
  }
  return *ops_.Binary(o.op, o.type, acc, v);
}

std::vector<Value*> ProgramCodegen::OneHotSplit(
    Value* i, int64_t span, const std::function<std::vector<Value*>()>& body) {
  Value* hit = nullptr;
  Value* at = b_.CreateTrunc(i, b_.getInt32Ty());
  for (size_t k = 0; k < p_.nodes.size(); ++k) {
    if (p_.nodes[k].kind != LoopNode::Kind::kIotaEq) continue;
    // hot is -1 (no column in the item) or in [0, n): hot - i below span
    // as unsigned exactly when the column is in the group.
    Value* in = b_.CreateICmpULT(b_.CreateSub(hot_[k], at), b_.getInt32(static_cast<int32_t>(span)));
    hit = hit == nullptr ? in : b_.CreateOr(hit, in);
  }
  if (hit == nullptr) return body();
  llvm::LLVMContext& c = b_.getContext();
  llvm::BasicBlock* hot = llvm::BasicBlock::Create(c, "one_hot", fn_);
  llvm::BasicBlock* cold = llvm::BasicBlock::Create(c, "no_hot", fn_);
  llvm::BasicBlock* merge = llvm::BasicBlock::Create(c, "hot_merge", fn_);
  b_.CreateCondBr(hit, hot, cold, llvm::MDBuilder(c).createBranchWeights(1, 1000));
  b_.SetInsertPoint(hot);
  const std::vector<Value*> with = body();
  llvm::BasicBlock* hot_end = b_.GetInsertBlock();
  b_.CreateBr(merge);
  b_.SetInsertPoint(cold);
  hot_off_ = true;
  const std::vector<Value*> without = body();
  hot_off_ = false;
  llvm::BasicBlock* cold_end = b_.GetInsertBlock();
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
  std::vector<Value*> merged(with.size());
  for (size_t k = 0; k < with.size(); ++k) {
    llvm::PHINode* phi = b_.CreatePHI(with[k]->getType(), 2);
    phi->addIncoming(with[k], hot_end);
    phi->addIncoming(without[k], cold_end);
    merged[k] = phi;
  }
  return merged;
}

// Prefetches the lines of kFoldLanes elements at i of every prefetched
// load (the caller points them some rows ahead).
void ProgramCodegen::Prefetch(Value* i) {
  for (size_t k = 0; k < p_.nodes.size(); ++k) {
    if (pf_ptr_[k] == nullptr) continue;
    const int64_t bytes = kFoldLanes * hlo::ByteWidth(p_.nodes[k].type);
    Value* base = BytePtr(pf_ptr_[k], b_.CreateMul(i, b_.getInt64(hlo::ByteWidth(p_.nodes[k].type))));
    for (int64_t off = 0; off < bytes; off += 64) {
      b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getInt8PtrTy()},
                         {BytePtr(base, b_.getInt64(off)), b_.getInt32(0), b_.getInt32(2),
                          b_.getInt32(1)});
    }
  }
}

// Vector registers one value of `width` f32 lanes takes.
int RegistersFor(int width, int register_lanes) {
  return std::max(1, width / register_lanes);
}

// The fast loop of a pass of float max / min folds over the item's whole
// kFoldLanes groups (EmitReduce): acc = acc > v ? acc : v (one max
// instruction) where the exact fold also keeps a NaN accumulator. The two
// agree while no accumulator is NaN, i.e. unless a folded value or a
// starting accumulator is NaN: the loop also sums the folded values (NaN
// if one is NaN; also, harmlessly, for +inf and -inf both), and ends in
// `done` with `*fast_acc` (from `*fast_end`) when neither happened, else
// in a new block from which the caller emits the exact loop.
bool ProgramCodegen::EmitMinMaxPass(int j0, int gw, int per_pass, Value* full,
                                    const std::vector<Value*>& acc, llvm::BasicBlock* done,
                                    std::vector<Value*>* fast_acc,
                                    llvm::BasicBlock** fast_end) {
  llvm::LLVMContext& c = b_.getContext();
  const size_t nout = p_.reduce_outputs.size();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::BasicBlock* head = llvm::BasicBlock::Create(c, "mm_head", fn_);
  llvm::BasicBlock* loop = llvm::BasicBlock::Create(c, "mm_loop", fn_);
  llvm::BasicBlock* check = llvm::BasicBlock::Create(c, "mm_check", fn_);
  llvm::BasicBlock* exact = llvm::BasicBlock::Create(c, "mm_exact", fn_);
  Value* nan_start = nullptr;
  for (Value* a : acc) {
    Value* any = b_.CreateOrReduce(b_.CreateFCmpUNO(a, a));
    nan_start = nan_start == nullptr ? any : b_.CreateOr(nan_start, any);
  }
  b_.CreateCondBr(nan_start, exact, head, llvm::MDBuilder(c).createBranchWeights(1, 1000));
  b_.SetInsertPoint(head);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2);
  i->addIncoming(b_.getInt64(0), pre);
  llvm::Type* vt = acc[0]->getType();
  std::vector<llvm::PHINode*> phis(acc.size()), sums(per_pass);
  for (size_t a = 0; a < acc.size(); ++a) {
    phis[a] = b_.CreatePHI(vt, 2);
    phis[a]->addIncoming(acc[a], pre);
  }
  for (int g = 0; g < per_pass; ++g) {
    sums[g] = b_.CreatePHI(vt, 2);
    sums[g]->addIncoming(llvm::Constant::getNullValue(vt), pre);
  }
  b_.CreateCondBr(b_.CreateICmpSLT(i, full), loop, check);
  b_.SetInsertPoint(loop);
  if (j0 == 0) Prefetch(i);
  std::vector<Value*> next(acc.size()), next_sums(per_pass);
  for (int g = 0; g < per_pass; ++g) {
    Group grp;
    grp.width = gw;
    grp.i = b_.CreateAdd(i, b_.getInt64(int64_t{j0 + g} * gw));
    if (!EmitGroup(&grp)) return false;
    Value* sum = sums[g];
    for (size_t o = 0; o < nout; ++o) {
      const LoopReduceOutput& ro = p_.reduce_outputs[o];
      Value* v = Arg(ro.node, grp);
      Value* a = phis[g * nout + o];
      Value* keep = ro.op == HloOpcode::kMaximum ? b_.CreateFCmpOGT(a, v) : b_.CreateFCmpOLT(a, v);
      next[g * nout + o] = b_.CreateSelect(keep, a, v);
      sum = b_.CreateFAdd(sum, v);
    }
    next_sums[g] = sum;
  }
  llvm::BasicBlock* loop_end = b_.GetInsertBlock();
  i->addIncoming(b_.CreateAdd(i, b_.getInt64(kFoldLanes)), loop_end);
  for (size_t a = 0; a < acc.size(); ++a) phis[a]->addIncoming(next[a], loop_end);
  for (int g = 0; g < per_pass; ++g) sums[g]->addIncoming(next_sums[g], loop_end);
  b_.CreateBr(head);
  b_.SetInsertPoint(check);
  Value* nan_seen = nullptr;
  for (llvm::PHINode* sum : sums) {
    Value* any = b_.CreateOrReduce(b_.CreateFCmpUNO(sum, sum));
    nan_seen = nan_seen == nullptr ? any : b_.CreateOr(nan_seen, any);
  }
  b_.CreateCondBr(nan_seen, exact, done, llvm::MDBuilder(c).createBranchWeights(1, 1000));
  fast_acc->assign(phis.begin(), phis.end());
  *fast_end = check;
  b_.SetInsertPoint(exact);
  return true;
}

// Accumulator vectors of a reduce's pass over an item: every output's
// accumulators for the lane groups of the pass stay in at most half the
// vector registers (16 with AVX2 and SSE, 32 with AVX-512), the rest for
// the node graph's values.
int AccumulatorBudget(int register_lanes) { return register_lanes >= 16 ? 16 : 8; }

// Element i of an item folds into lane i mod kFoldLanes, in element order.
// The whole groups of kFoldLanes elements are folded a few lane groups per
// pass: one pass reads the item once, with every output's accumulators for
// those lane groups in registers (independent chains, so a reducer's
// latency does not bound the loop); programs with many outputs take several
// passes (the item from L1 after the first). A lane group is two vector
// registers wide where the budget allows: the two halves' chains then share
// one basic block (exp's rare-range branch, one per group, would otherwise
// keep the scheduler from interleaving them). The rest a vector and then an
// element at a time on the lanes in memory.
bool ProgramCodegen::EmitReduce() {
  const size_t nout = p_.reduce_outputs.size();
  const int budget = AccumulatorBudget(register_lanes_);
  const int out_count = static_cast<int>(nout);
  // gw: IR lanes of one lane group; per_pass: lane groups of one pass.
  int gw = lanes_;
  if (2 * lanes_ <= kFoldLanes &&
      out_count * RegistersFor(2 * lanes_, register_lanes_) <= budget) {
    gw = 2 * lanes_;
  }
  const int groups = kFoldLanes / gw;
  int per_pass = 1;
  while (per_pass * 2 <= groups &&
         per_pass * 2 * out_count * RegistersFor(gw, register_lanes_) <= budget) {
    per_pass *= 2;
  }
  std::vector<Value*> acc_ptr(nout);
  for (size_t o = 0; o < nout; ++o) {
    acc_ptr[o] = BytePtr(out_, b_.getInt64(static_cast<int64_t>(o) * kLoopBlock * 8));
  }
  auto lane_ptr = [&](size_t o, Value* lane) {
    return BytePtr(acc_ptr[o],
                   b_.CreateMul(lane, b_.getInt64(ComputeWidth(p_.reduce_outputs[o].type))));
  };
  Value* full = b_.CreateAnd(n_, b_.getInt64(~int64_t{kFoldLanes - 1}));
  llvm::LLVMContext& c = b_.getContext();
  bool ok = true;
  bool plain_minmax = true;
  for (const LoopReduceOutput& o : p_.reduce_outputs) {
    plain_minmax &= o.type == PrimitiveType::kF32 && o.fold_select == nullptr &&
                    o.fold_product == nullptr &&
                    (o.op == HloOpcode::kMaximum || o.op == HloOpcode::kMinimum);
  }
  for (const LoopNode& n : p_.nodes) plain_minmax &= n.kind != LoopNode::Kind::kIotaEq;
  for (int j0 = 0; j0 < groups; j0 += per_pass) {
    // acc[g * nout + o]: output o's accumulator for lane group j0 + g.
    std::vector<Value*> acc(per_pass * nout);
    Value* init = b_.CreateICmpNE(b_.CreateAnd(flags_, b_.getInt64(kJitInitLanes)),
                                  b_.getInt64(0));
    for (int g = 0; g < per_pass; ++g) {
      for (size_t o = 0; o < nout; ++o) {
        const LoopReduceOutput& ro = p_.reduce_outputs[o];
        Value* kept = LoadAt(Shaped(Ty(ro.type), gw),
                             lane_ptr(o, b_.getInt64(int64_t{j0 + g} * gw)));
        acc[g * nout + o] = b_.CreateSelect(init, ops_.Widen(Identity(ro), gw), kept);
      }
    }
    llvm::BasicBlock* done = llvm::BasicBlock::Create(c, "rdone", fn_);
    // Float max / min folds first take a loop of plain max (min)
    // instructions, which agrees with the exact fold unless an accumulator
    // is NaN; a sum of the folded values (NaN when one is) tells, and then
    // the exact loop runs the item's pass again from the start.
    std::vector<Value*> fast_acc;
    llvm::BasicBlock* fast_end = nullptr;
    if (plain_minmax) {
      if (!EmitMinMaxPass(j0, gw, per_pass, full, acc, done, &fast_acc, &fast_end)) return false;
    }
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    llvm::BasicBlock* head = llvm::BasicBlock::Create(c, "rhead", fn_);
    llvm::BasicBlock* loop = llvm::BasicBlock::Create(c, "rloop", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2);
    i->addIncoming(b_.getInt64(0), pre);
    std::vector<llvm::PHINode*> phis(acc.size());
    for (size_t a = 0; a < acc.size(); ++a) {
      phis[a] = b_.CreatePHI(acc[a]->getType(), 2);
      phis[a]->addIncoming(acc[a], pre);
    }
    b_.CreateCondBr(b_.CreateICmpSLT(i, full), loop, done);
    b_.SetInsertPoint(loop);
    if (j0 == 0) Prefetch(i);  // the first pass brings the item's lines in
    // A one-hot column (a gathered logit: sum of select(iota == y, x, 0))
    // is in one block of kFoldLanes elements of a row: the others take a
    // copy where its compares are false (the selects fold to constants).
    const std::vector<Value*> next = OneHotSplit(i, kFoldLanes, [&] {
      std::vector<Value*> folded(acc.size());
      for (int g = 0; g < per_pass && ok; ++g) {
        Group grp;
        grp.width = gw;
        grp.i = b_.CreateAdd(i, b_.getInt64(int64_t{j0 + g} * gw));
        if (!EmitGroup(&grp)) {
          ok = false;
          break;
        }
        for (size_t o = 0; o < nout; ++o) {
          folded[g * nout + o] = FoldValue(p_.reduce_outputs[o], grp, phis[g * nout + o]);
        }
      }
      if (!ok) folded.clear();  // as EmitElementwise: nothing to merge, the emit fails
      return folded;
    });
    if (!ok) return false;
    i->addIncoming(b_.CreateAdd(i, b_.getInt64(kFoldLanes)), b_.GetInsertBlock());
    for (size_t a = 0; a < acc.size(); ++a) phis[a]->addIncoming(next[a], b_.GetInsertBlock());
    b_.CreateBr(head);
    b_.SetInsertPoint(done);
    std::vector<Value*> result(phis.begin(), phis.end());
    if (fast_end != nullptr) {  // PHIs first in the block, then the stores
      for (size_t a = 0; a < acc.size(); ++a) {
        llvm::PHINode* merged = b_.CreatePHI(phis[a]->getType(), 2);
        merged->addIncoming(phis[a], head);
        merged->addIncoming(fast_acc[a], fast_end);
        result[a] = merged;
      }
    }
    for (int g = 0; g < per_pass; ++g) {
      for (size_t o = 0; o < nout; ++o) {
        Value* v = result[g * nout + o];
        b_.CreateAlignedStore(
            v, TypedPtr(lane_ptr(o, b_.getInt64(int64_t{j0 + g} * gw)), v->getType()),
            llvm::MaybeAlign(1));
      }
    }
  }
  auto fold_in_memory = [&](int width) {
    return [&, width](Value* at) {
      Group g;
      g.width = width;
      g.i = at;
      if (!EmitGroup(&g)) {
        ok = false;
        return;
      }
      Value* lane = b_.CreateAnd(at, b_.getInt64(kFoldLanes - 1));
      for (size_t o = 0; o < nout; ++o) {
        const LoopReduceOutput& ro = p_.reduce_outputs[o];
        llvm::Type* t = Shaped(Ty(ro.type), width);
        Value* ptr = lane_ptr(o, lane);
        Value* a = LoadAt(t, ptr);
        b_.CreateAlignedStore(FoldValue(ro, g, a), TypedPtr(ptr, t), llvm::MaybeAlign(1));
      }
    };
  };
  Value* at = Loop(
      full, [&](Value* x) { return b_.CreateICmpSLE(b_.CreateAdd(x, b_.getInt64(lanes_)), n_); },
      lanes_, fold_in_memory(lanes_));
  Loop(at, [&](Value* x) { return b_.CreateICmpSLT(x, n_); }, 1, fold_in_memory(1));
  if (ok) EmitFinish();
  return ok;
}

Value* ProgramCodegen::Identity(const LoopReduceOutput& o) {
  uint64_t bits = 0;
  ReducerIdentity(o.op, o.type, &bits);  // JitReducer ops all have one
  if (o.type == PrimitiveType::kF32 || o.type == PrimitiveType::kBF16) {
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return llvm::ConstantFP::get(b_.getFloatTy(), f);
  }
  return b_.getInt32(static_cast<uint32_t>(bits));
}

// kJitFinishChunk: lanes folded pairwise (lane i with lane i + f/2 for
// f = kFoldLanes, ..., 2) into partials[o]; kJitFinishSegment: then the
// init value combined with it and stored at results[o].
void ProgramCodegen::EmitFinish() {
  llvm::LLVMContext& c = b_.getContext();
  llvm::BasicBlock* tree = llvm::BasicBlock::Create(c, "tree", fn_);
  llvm::BasicBlock* segment = llvm::BasicBlock::Create(c, "segment", fn_);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(c, "exit", fn_);
  auto flag = [&](int64_t f) {
    return b_.CreateICmpNE(b_.CreateAnd(flags_, b_.getInt64(f)), b_.getInt64(0));
  };
  b_.CreateCondBr(flag(kJitFinishChunk), tree, exit);
  b_.SetInsertPoint(tree);
  const size_t nout = p_.reduce_outputs.size();
  std::vector<Value*> partial(nout);
  for (size_t o = 0; o < nout; ++o) {
    const LoopReduceOutput& ro = p_.reduce_outputs[o];
    const int cw = ComputeWidth(ro.type);
    llvm::Type* vt = Shaped(Ty(ro.type), lanes_);
    Value* base = BytePtr(out_, b_.getInt64(static_cast<int64_t>(o) * kLoopBlock * 8));
    std::vector<Value*> v;
    for (int j = 0; j < kFoldLanes / lanes_; ++j) {
      v.push_back(LoadAt(vt, BytePtr(base, b_.getInt64(int64_t{j} * lanes_ * cw))));
    }
    while (v.size() > 1) {
      const size_t half = v.size() / 2;
      for (size_t k = 0; k < half; ++k) v[k] = *ops_.Binary(ro.op, ro.type, v[k], v[k + half]);
      v.resize(half);
    }
    Value* x = v[0];
    for (int f = lanes_; f > 1; f /= 2) {
      std::vector<int> mask(lanes_);
      for (int l = 0; l < lanes_; ++l) mask[l] = l < f / 2 ? l + f / 2 : l;
      x = *ops_.Binary(ro.op, ro.type, x, b_.CreateShuffleVector(x, mask));
    }
    partial[o] = b_.CreateExtractElement(x, uint64_t{0});
    b_.CreateAlignedStore(
        partial[o],
        TypedPtr(BytePtr(partials_, b_.getInt64(static_cast<int64_t>(o) * 8)), partial[o]->getType()),
        llvm::MaybeAlign(1));
  }
  b_.CreateCondBr(flag(kJitFinishSegment), segment, exit);
  b_.SetInsertPoint(segment);
  llvm::Type* i8p = b_.getInt8PtrTy();
  for (size_t o = 0; o < nout; ++o) {
    const LoopReduceOutput& ro = p_.reduce_outputs[o];
    Value* at = b_.getInt64(static_cast<int64_t>(o));
    Value* init_ptr = b_.CreateLoad(i8p, b_.CreateGEP(i8p, inits_, at));
    Value* init = ops_.FromStorage(ro.type, LoadAt(ops_.StorageType(ro.type), init_ptr));
    Value* r = *ops_.Binary(ro.op, ro.type, init, partial[o]);
    Value* dst = BytePtr(b_.CreateLoad(i8p, b_.CreateGEP(i8p, results_, at)),
                         b_.CreateMul(row_, b_.getInt64(hlo::ByteWidth(ro.type))));
    Value* stored = ops_.ToStorage(ro.type, r);
    b_.CreateAlignedStore(stored, TypedPtr(dst, stored->getType()), llvm::MaybeAlign(1));
  }
  b_.CreateBr(exit);
  b_.SetInsertPoint(exit);
}

bool ProgramCodegen::EmitElementwise() {
  const PrimitiveType ot = p_.out_type;
  const int64_t ow = hlo::ByteWidth(ot);
  bool ok = true;
  // The stored value of `width` elements at `at` (nullptr: not expressible).
  auto group_value = [&](int width, Value* at) -> Value* {
    Group g;
    g.width = width;
    g.i = at;
    if (!EmitGroup(&g)) return nullptr;
    return ops_.ToStorage(ot, Arg(p_.root, g));
  };
  auto store_value = [&](int width, bool nontemporal, Value* at, Value* v) {
    llvm::Type* t = v->getType();
    const int64_t bytes = width * ow;
    llvm::StoreInst* st = b_.CreateAlignedStore(
        v, TypedPtr(BytePtr(out_, b_.CreateMul(at, b_.getInt64(ow))), t),
        llvm::MaybeAlign(nontemporal ? std::min<int64_t>(bytes, 64) : 1));
    if (nontemporal) {
      st->setMetadata(llvm::LLVMContext::MD_nontemporal,
                      llvm::MDNode::get(b_.getContext(),
                                        {llvm::ConstantAsMetadata::get(b_.getInt32(1))}));
    }
  };
  auto store_group = [&](int width, bool nontemporal) {
    return [&, width, nontemporal](Value* at) {
      Value* v = group_value(width, at);
      if (v == nullptr) {
        ok = false;
        return;
      }
      store_value(width, nontemporal, at, v);
    };
  };
  Value* i = b_.getInt64(0);
  if (streaming_) {
    // Elements one at a time until the output is 64-byte aligned.
    Value* addr = b_.CreatePtrToInt(out_, b_.getInt64Ty());
    i = Loop(
        i,
        [&](Value* x) {
          Value* misaligned = b_.CreateICmpNE(
              b_.CreateAnd(b_.CreateAdd(addr, b_.CreateMul(x, b_.getInt64(ow))), b_.getInt64(63)),
              b_.getInt64(0));
          return b_.CreateAnd(b_.CreateICmpSLT(x, n_), misaligned);
        },
        1, store_group(1, false));
  }
  const bool nt = streaming_ && lanes_ * ow <= 64;
  // Four vectors per group in the loop over whole kFoldLanes runs: their
  // chains share a basic block (see EmitReduce; at the seed shape's
  // backward on AVX2, 1.14 -> 0.82 ns per element from L1, eight spill);
  // streamed stores start 64-byte aligned and stay so (every width is a
  // power of two).
  const int pair = std::min<int>(4 * lanes_, kFoldLanes);
  const int groups = kFoldLanes / pair;
  i = Loop(
      i, [&](Value* x) { return b_.CreateICmpSLE(b_.CreateAdd(x, b_.getInt64(kFoldLanes)), n_); },
      kFoldLanes, [&](Value* x) {
        Prefetch(x);
        // The values are merged and stored after the split: stores in both
        // copies would be merged by LLVM without their non-temporal hint.
        const std::vector<Value*> values = OneHotSplit(x, kFoldLanes, [&] {
          std::vector<Value*> v(groups);
          for (int j = 0; j < groups && ok; ++j) {
            v[j] = group_value(pair, b_.CreateAdd(x, b_.getInt64(int64_t{j} * pair)));
            if (v[j] == nullptr) ok = false;
          }
          if (!ok) v.clear();
          return v;
        });
        for (size_t j = 0; j < values.size(); ++j) {
          store_value(pair, nt, b_.CreateAdd(x, b_.getInt64(static_cast<int64_t>(j) * pair)),
                      values[j]);
        }
      });
  i = Loop(
      i, [&](Value* x) { return b_.CreateICmpSLE(b_.CreateAdd(x, b_.getInt64(lanes_)), n_); },
      lanes_, store_group(lanes_, nt));
  Loop(i, [&](Value* x) { return b_.CreateICmpSLT(x, n_); }, 1, store_group(1, false));
  if (streaming_) b_.CreateIntrinsic(llvm::Intrinsic::x86_sse_sfence, {}, {});
  return ok;
}

bool ProgramCodegen::Emit(const std::string& name) {
  llvm::LLVMContext& c = m_->getContext();
  llvm::Type* i8p = b_.getInt8PtrTy();
  llvm::Type* i8pp = llvm::PointerType::getUnqual(i8p);
  // JitItem's fields, in order.
  llvm::Type* i64p = llvm::PointerType::getUnqual(b_.getInt64Ty());
  llvm::StructType* item_t = llvm::StructType::get(
      c, {i8pp, i8pp, i64p, b_.getInt64Ty(), b_.getInt64Ty(), i8p, b_.getInt64Ty(), i8p, i8pp,
          i8pp, b_.getInt64Ty(), i64p, b_.getInt64Ty()});
  llvm::FunctionType* ft = llvm::FunctionType::get(b_.getVoidTy(), {i8p}, false);
  fn_ = llvm::Function::Create(ft, llvm::Function::ExternalLinkage, name, m_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  b_.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", fn_));
  Value* item = b_.CreateBitCast(fn_->getArg(0), llvm::PointerType::getUnqual(item_t));
  auto field = [&](int f) {
    return b_.CreateLoad(item_t->getElementType(f), b_.CreateStructGEP(item_t, item, f));
  };
  Value* loads = field(0);
  Value* prefetch = field(1);
  idx_ = field(2);
  c0_ = field(3);
  n_ = field(4);
  Value* out = field(5);
  if (p_.reduce) {
    flags_ = field(6);
    partials_ = field(7);
    inits_ = field(8);
    results_ = field(9);
  }
  Value* rows = field(10);
  Value* row_steps = field(11);
  Value* out_row_step = field(12);
  const size_t nn = p_.nodes.size();
  std::vector<Value*> load_base(nn, nullptr), pf_base(nn, nullptr), step(nn, nullptr);
  int slot = 0;
  for (size_t k = 0; k < nn; ++k) {
    const LoopNode& n = p_.nodes[k];
    if (n.kind != LoopNode::Kind::kLoad) continue;
    load_base[k] = b_.CreateLoad(i8p, b_.CreateGEP(i8p, loads, b_.getInt64(slot)));
    step[k] = b_.CreateLoad(b_.getInt64Ty(),
                            b_.CreateGEP(b_.getInt64Ty(), row_steps, b_.getInt64(slot)));
    if (Prefetched(p_, n)) {
      pf_base[k] = b_.CreateLoad(i8p, b_.CreateGEP(i8p, prefetch, b_.getInt64(slot)));
    }
    ++slot;
  }
  // The rows of the call: the item's code once per row (rows >= 1).
  llvm::BasicBlock* entry = b_.GetInsertBlock();
  llvm::BasicBlock* row_head = llvm::BasicBlock::Create(c, "row", fn_);
  b_.CreateBr(row_head);
  b_.SetInsertPoint(row_head);
  llvm::PHINode* row = b_.CreatePHI(b_.getInt64Ty(), 2);
  row->addIncoming(b_.getInt64(0), entry);
  row_ = row;
  inv_.assign(nn, nullptr);
  load_ptr_.assign(nn, nullptr);
  pf_ptr_.assign(nn, nullptr);
  for (size_t k = 0; k < nn; ++k) {
    if (load_base[k] == nullptr) continue;
    Value* advance = b_.CreateMul(row, step[k]);
    load_ptr_[k] = BytePtr(load_base[k], advance);
    if (pf_base[k] != nullptr) pf_ptr_[k] = BytePtr(pf_base[k], advance);
  }
  // Reduce programs: `out` is the fold lanes, the same for every row.
  out_ = p_.reduce ? out : BytePtr(out, b_.CreateMul(row, out_row_step));
  if (!EmitInvariants()) return false;
  if (!(p_.reduce ? EmitReduce() : EmitElementwise())) return false;
  Value* next = b_.CreateAdd(row, b_.getInt64(1));
  row->addIncoming(next, b_.GetInsertBlock());
  llvm::BasicBlock* done = llvm::BasicBlock::Create(c, "rows_done", fn_);
  b_.CreateCondBr(b_.CreateICmpSLT(next, rows), row_head, done);
  b_.SetInsertPoint(done);
  b_.CreateRetVoid();
  return !llvm::verifyFunction(*fn_, &llvm::errs());
}

// The process's JIT: one LLJIT for the host CPU, and the compiled programs.
class Engine {
 public:
  static Engine& Get() {
    static Engine* const e = new Engine();  // never destroyed: code stays valid
    return *e;
  }
  bool ok() const { return jit_ != nullptr; }

  LoopItemFn Compile(const LoopProgram& p, bool streaming) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string key = Signature(p, streaming, lanes_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    LoopItemFn fn = CompileLocked(p, streaming);
    cache_.emplace(key, fn);
    return fn;
  }

 private:
  Engine() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) {
      llvm::consumeError(jtmb.takeError());
      return;
    }
    jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    llvm::StringMap<bool> features;
    llvm::sys::getHostCPUFeatures(features);
    lanes_ = features.lookup("avx512f") ? 16 : features.lookup("avx2") ? 8 : 4;
    register_lanes_ = lanes_;
    // VCVTNE2PS2BF16 (AVX512_BF16) and the subnormal test VFPCLASSPS
    // (AVX512DQ): every CPU with the first has the second, checked anyway.
    bf16_convert_ = features.lookup("avx512bf16") && features.lookup("avx512dq");
    // Tests: TPUOFF_JIT_LANES=4|8|16 emits another width's code (LLVM
    // legalises wider vectors for this CPU), so the 16-lane code of an
    // AVX-512 machine is checked on an AVX2 one too.
    if (const char* forced = std::getenv("TPUOFF_JIT_LANES")) {
      const std::string v = forced;
      if (v == "4" || v == "8" || v == "16") lanes_ = std::stoi(v);
    }
    auto tm = jtmb->createTargetMachine();
    if (!tm) {
      llvm::consumeError(tm.takeError());
      return;
    }
    tm_ = std::move(*tm);
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
    if (!jit) {
      llvm::consumeError(jit.takeError());
      return;
    }
    jit_ = std::move(*jit);
    cache_dir_ = JitCacheDirectory();
    if (!cache_dir_.empty()) {
      const std::string build = BuildIdentity();
      if (build.empty()) {
        cache_dir_.clear();
      } else {
        std::vector<std::string> on;
        for (const auto& f : features) {
          if (f.getValue()) on.push_back(f.getKey().str());
        }
        std::sort(on.begin(), on.end());
        identity_ = absl::StrCat("llvm ", LLVM_VERSION_STRING, "\ncpu ",
                                 llvm::sys::getHostCPUName().str(), " ", absl::StrJoin(on, ","),
                                 "\nregister lanes ", register_lanes_, "\nbuild ", build, "\n");
      }
    }
  }

  // The file holding this code generator, its size and modification time:
  // a rebuilt tpuoff (another code generator) never loads an older build's
  // objects. "" when it cannot be told.
  static std::string BuildIdentity() {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&CompileLoopJit), &info) == 0 ||
        info.dli_fname == nullptr) {
      return "";
    }
    std::string path = info.dli_fname;
    struct stat st;
    if (path.find('/') == std::string::npos || stat(path.c_str(), &st) != 0) {
      path = "/proc/self/exe";
      if (stat(path.c_str(), &st) != 0) return "";
    }
    return absl::StrCat(path, " ", st.st_size, " ", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec,
                        " ", st.st_ino);
  }

  void Optimize(llvm::Module* m) {
    llvm::PipelineTuningOptions tuning;
    tuning.LoopVectorization = false;  // the code is vectorised already
    tuning.SLPVectorization = false;
    tuning.LoopUnrolling = false;  // the loops are laid out as they should run
    llvm::PassBuilder pb(tm_.get(), tuning);
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(*m, mam);
  }

  LoopItemFn CompileLocked(const LoopProgram& p, bool streaming) {
    if (!ok() || !Expressible(p)) return nullptr;
    // The function's name comes from its key, so an object from the disk
    // cache defines the name this process looks up.
    const std::string key = absl::StrCat(identity_, Signature(p, streaming, lanes_));
    const std::string name = absl::StrCat("tpuoff_loop_", JitCacheName(key));
    if (!cache_dir_.empty()) {
      if (std::optional<std::string> object = LoadJitObject(cache_dir_, key)) {
        if (LoopItemFn fn = AddObject(llvm::MemoryBuffer::getMemBufferCopy(*object, name), name)) {
          return fn;
        }
        // Not loadable after all: compile under another name (the failed
        // object may have defined some symbols).
        return Compile(p, streaming, key, absl::StrCat(name, "_", counter_++), false);
      }
    }
    return Compile(p, streaming, key, name, !cache_dir_.empty());
  }

  LoopItemFn Compile(const LoopProgram& p, bool streaming, const std::string& key,
                     const std::string& name, bool store) {
    auto ctx = std::make_unique<llvm::LLVMContext>();
    auto m = std::make_unique<llvm::Module>(name, *ctx);
    m->setDataLayout(jit_->getDataLayout());
    m->setTargetTriple(tm_->getTargetTriple().str());
    ProgramCodegen gen(p, streaming, lanes_, register_lanes_, bf16_convert_, m.get());
    if (!gen.Emit(name)) return nullptr;
    Optimize(m.get());
    if (const char* dir = std::getenv("TPUOFF_JIT_DUMP")) {  // debugging: the optimised IR
      std::error_code ec;
      llvm::raw_fd_ostream out(absl::StrCat(dir, "/", name, ".ll"), ec);
      if (!ec) m->print(out, nullptr);
    }
    llvm::orc::SimpleCompiler compiler(*tm_);
    auto object = compiler(*m);
    if (!object) {
      llvm::consumeError(object.takeError());
      return nullptr;
    }
    if (store) {
      StoreJitObject(cache_dir_, key,
                     std::string_view((*object)->getBufferStart(), (*object)->getBufferSize()));
    }
    return AddObject(std::move(*object), name);
  }

  // Links an object into the JIT and returns its function `name`.
  LoopItemFn AddObject(std::unique_ptr<llvm::MemoryBuffer> object, const std::string& name) {
    if (llvm::Error e = jit_->addObjectFile(std::move(object))) {
      llvm::consumeError(std::move(e));
      return nullptr;
    }
    auto sym = jit_->lookup(name);
    if (!sym) {
      llvm::consumeError(sym.takeError());
      return nullptr;
    }
#if LLVM_VERSION_MAJOR >= 15
    return reinterpret_cast<LoopItemFn>(sym->getValue());
#else
    return reinterpret_cast<LoopItemFn>(sym->getAddress());
#endif
  }

  std::mutex mu_;
  std::unique_ptr<llvm::TargetMachine> tm_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  int lanes_ = 8;
  int register_lanes_ = 8;
  bool bf16_convert_ = false;  // the CPU has AVX512_BF16
  int64_t counter_ = 0;
  absl::flat_hash_map<std::string, LoopItemFn> cache_;
  std::string cache_dir_;  // the disk cache (jit_disk_cache.h); "" for none
  std::string identity_;   // LLVM, the CPU, this build: part of every disk key
};

}  // namespace

bool LoopJitAvailable() { return Engine::Get().ok(); }

LoopItemFn CompileLoopJit(const LoopProgram& program, bool streaming_stores) {
  Engine& e = Engine::Get();
  if (!e.ok()) return nullptr;
  return e.Compile(program, streaming_stores);
}

#endif  // TPUOFF_HAVE_JIT

}  // namespace tpuoff::runtime

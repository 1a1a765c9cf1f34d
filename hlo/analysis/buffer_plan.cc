#include "hlo/analysis/buffer_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/analysis/loop_fusion.h"
#include "hlo/ir/status_macros.h"

namespace tpuoff::hlo {
namespace {

using PlanFn = std::function<absl::StatusOr<const ComputationPlan*>(
    const HloComputation*, ParamMode)>;

// A bitcast between shapes whose layouts make it a pure reinterpretation.
bool IsPlainBitcast(const HloInstruction* x) {
  return x->shape().HasDefaultLayout() &&
         x->operand(0)->shape().HasDefaultLayout();
}

struct Group {
  const HloInstruction* root = nullptr;  // the last root in schedule order
  LoopGroupKind kind = LoopGroupKind::kElementwise;
  // Every root in schedule order (several for sibling reduces), root last.
  std::vector<const HloInstruction*> roots;
  // Fused instructions; excludes reduce roots and an update root. Members
  // that IsDuplicableInLoop may belong to several groups.
  absl::flat_hash_set<const HloInstruction*> members;

  bool reduce() const { return kind == LoopGroupKind::kReduce; }
  bool update() const { return kind == LoopGroupKind::kUpdate; }
  // Whether `x` is a root evaluated outside the member DAG (a reduce or
  // update root), whose operands are not all computed by the loop.
  bool IsSpecialRoot(const HloInstruction* x) const {
    return kind != LoopGroupKind::kElementwise &&
           std::find(roots.begin(), roots.end(), x) != roots.end();
  }
  bool Computes(const HloInstruction* x) const {
    return members.contains(x) || std::find(roots.begin(), roots.end(), x) != roots.end();
  }
};

class Planner {
 public:
  Planner(const HloComputation* c, ParamMode mode, bool is_entry,
          const PlanOptions& options, PlanFn plan_callee, ComputationPlan* out)
      : c_(c), mode_(mode), is_entry_(is_entry), options_(options),
        plan_callee_(std::move(plan_callee)), p_(out) {}

  absl::Status Run() {
    p_->computation = c_;
    p_->mode = mode_;
    if (c_->root() == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("computation ", c_->name(), " has no root"));
    }
    Schedule();
    FormGroups();
    RETURN_IF_ERROR(MakeSteps());
    ComputeReads();
    RETURN_IF_ERROR(AssignBuffers());
    FinishLifetimes();
    return absl::OkStatus();
  }

 private:
  void Schedule() {
    for (const HloInstruction* x : c_->ReachablePostOrder()) reachable_.insert(x);
    for (const HloInstruction* p : c_->parameters()) {
      if (p != nullptr) reachable_.insert(p);
    }
    for (const HloInstruction* x : c_->InstructionOrder()) {
      if (!reachable_.contains(x)) continue;
      position_[x] = static_cast<int>(order_.size());
      order_.push_back(x);
    }
  }

  // Whether special root `u` (reduce / update) consumes `x` inside the loop:
  // as the reduced input or the update, not as init / base / start index.
  static bool ReadsThroughLoop(const HloInstruction* u, const HloInstruction* x) {
    const int64_t loop_operand = u->opcode() == HloOpcode::kDynamicUpdateSlice ? 1 : 0;
    for (int64_t i = 0; i < u->operand_count(); ++i) {
      if (u->operand(i) == x && i != loop_operand) return false;
    }
    return true;
  }

  // An index-mapping member (broadcast, transpose, slice, ...) loads its
  // operand from that operand's buffer (through a strided map), unless the
  // operand is a constant read from its literal: such an operand must be
  // materialised even when every user is in the group.
  static bool ReadsBufferOf(const HloInstruction* u, const HloInstruction* x) {
    return IsIndexMappingOp(u->opcode()) && x->opcode() != HloOpcode::kConstant;
  }

  // Every reachable user can fuse `x` (a precondition for duplicating it
  // into several groups instead of materialising it). Memoised: an operand
  // shared by many groups is asked once per group.
  bool AllUsersFusible(const HloInstruction* x) {
    auto [it, inserted] = all_users_fusible_.try_emplace(x, false);
    if (inserted) it->second = ComputeAllUsersFusible(x);
    return it->second;
  }

  bool ComputeAllUsersFusible(const HloInstruction* x) const {
    if (x == c_->root()) return false;
    for (const HloInstruction* u : x->users()) {
      if (!reachable_.contains(u)) continue;
      if (!(IsLoopFusible(*u) || IsStreamingReduce(*u) ||
            (u->opcode() == HloOpcode::kDynamicUpdateSlice && IsFusibleUpdate(*u) &&
             ReadsThroughLoop(u, x)))) {
        return false;
      }
    }
    return true;
  }

  // Whether `x`, a member of some groups, must also be materialised: a user
  // reads its buffer (an unfused op, the computation root, or a group that
  // evaluates the user without evaluating x).
  bool NeedsOwnValue(const HloInstruction* x) const {
    if (x == c_->root()) return true;
    for (const HloInstruction* u : x->users()) {
      if (!reachable_.contains(u)) continue;
      const std::vector<int>* in = GroupsComputing(u);
      if (in == nullptr) return true;
      for (int gid : *in) {
        const Group& g = groups_[gid];
        if (!g.members.contains(x)) return true;
        if (g.IsSpecialRoot(u) && !ReadsThroughLoop(u, x)) return true;
        if (g.members.contains(u) && ReadsBufferOf(u, x)) return true;
      }
    }
    return false;
  }

  const std::vector<int>* GroupsComputing(const HloInstruction* x) const {
    auto it = computed_by_.find(x);
    return it == computed_by_.end() ? nullptr : &it->second;
  }

  void AddToGroup(int gid, const HloInstruction* x) {
    groups_[gid].members.insert(x);
    computed_by_[x].push_back(gid);
  }

  // Absorbs operands of members until nothing changes (a fixpoint, so
  // diamonds join whichever branch is seen first). An operand joins when
  // all its users are in the group, or when it is cheap to recompute
  // (IsDuplicableInLoop) and every user can fuse it: then each consumer
  // group evaluates its own copy and it is never materialised.
  //
  // Worklist form, linear in the group's edges: every instruction joining
  // the group examines its operands once; an operand whose users are not
  // all in yet is examined again when the last of them joins (the counts
  // in `in_group_users`). Whether an operand may join through a given
  // member depends only on the pair, and "all users in the group" only
  // grows, so the result is the same fixpoint as repeating full passes.
  void Absorb(int gid, const std::vector<int64_t>& dims) {
    std::vector<const HloInstruction*> work;
    // Distinct users of an operand that the group computes and that read
    // it inside the loop (all of them: it may join).
    absl::flat_hash_map<const HloInstruction*, int64_t> in_group_users;
    // Operands some member may fuse (the pair's shape/mapping rules hold).
    absl::flat_hash_set<const HloInstruction*> pair_ok;

    auto try_join = [&](const HloInstruction* op) {
      const Group& cur = groups_[gid];
      if (cur.members.contains(op) || !pair_ok.contains(op)) return;
      const bool elsewhere = computed_by_.contains(op);
      const bool exclusive = !elsewhere && op != c_->root() &&
                             in_group_users[op] == ReachableUserCount(op);
      const bool duplicate = IsDuplicableInLoop(*op) && AllUsersFusible(op);
      if (!exclusive && !duplicate) return;
      AddToGroup(gid, op);
      work.push_back(op);
    };
    // `m` is computed by the group: count it as a user of its operands.
    auto count_user = [&](const HloInstruction* m) {
      const bool special = groups_[gid].IsSpecialRoot(m);
      for (int64_t i = 0; i < m->operand_count(); ++i) {
        const HloInstruction* op = m->operand(i);
        bool first = true;  // count each distinct operand once
        for (int64_t j = 0; j < i; ++j) first &= m->operand(j) != op;
        if (!first || (special && !ReadsThroughLoop(m, op)) || (!special && ReadsBufferOf(m, op))) {
          continue;
        }
        ++in_group_users[op];
        try_join(op);
      }
    };
    {
      const Group& g = groups_[gid];
      for (const HloInstruction* m : g.members) work.push_back(m);
      for (const HloInstruction* r : g.roots) {
        if (g.IsSpecialRoot(r)) work.push_back(r);
      }
    }
    // Instructions whose operands were counted (each once).
    absl::flat_hash_set<const HloInstruction*> counted;
    while (!work.empty()) {
      const HloInstruction* m = work.back();
      work.pop_back();
      if (!counted.insert(m).second) continue;
      count_user(m);
      const Group& cur = groups_[gid];
      int64_t first = 0, last = m->operand_count();
      if (cur.IsSpecialRoot(m)) {
        first = m->opcode() == HloOpcode::kDynamicUpdateSlice ? 1 : 0;
        last = first + 1;
      }
      for (int64_t i = first; i < last; ++i) {
        const HloInstruction* op = m->operand(i);
        if (groups_[gid].members.contains(op) || root_group_.contains(op) ||
            !IsLoopFusible(*op)) {
          continue;
        }
        const bool is_const = op->opcode() == HloOpcode::kConstant;
        if (!groups_[gid].IsSpecialRoot(m)) {
          if (IsIndexMappingOp(m->opcode())) {
            if (!is_const) continue;  // mapped operands are read directly
          } else if (op->shape().dimensions() != dims &&
                     !(is_const && op->shape().rank() == 0)) {
            continue;
          }
        }
        pair_ok.insert(op);
        try_join(op);
      }
    }
  }

  // Distinct reachable users of `x` (memoised).
  int64_t ReachableUserCount(const HloInstruction* x) {
    auto [it, inserted] = reachable_users_.try_emplace(x, 0);
    if (inserted) {
      for (const HloInstruction* u : x->users()) it->second += reachable_.contains(u);
    }
    return it->second;
  }

  int NewGroup(const HloInstruction* x, LoopGroupKind kind) {
    Group g;
    g.root = x;
    g.kind = kind;
    g.roots = {x};
    const int gid = static_cast<int>(groups_.size());
    groups_.push_back(std::move(g));
    root_group_[x] = gid;
    computed_by_[x].push_back(gid);
    return gid;
  }

  // Streaming reduces positioned before `x` over the same input dimensions
  // and reduce dimensions, still unplanned, whose users all come after `x`:
  // they can be computed in x's pass (multi-output fusion). The candidates
  // are kept per (input dims, reduce dims) in `siblings_`, so this costs the
  // reduces it takes, not a scan of everything before x.
  void AddSiblingReduces(int gid) {
    const HloInstruction* x = groups_[gid].root;
    auto key = sibling_key_.find(x);
    if (key == sibling_key_.end()) return;
    std::set<int>& candidates = siblings_[key->second];
    std::vector<int> taken(candidates.begin(), candidates.end());  // ascending
    candidates.clear();
    Group& g = groups_[gid];
    std::vector<const HloInstruction*> roots;
    for (int pos : taken) {
      const HloInstruction* r = order_[pos];
      roots.push_back(r);
      root_group_[r] = gid;
      computed_by_[r].push_back(gid);
    }
    roots.insert(roots.end(), g.roots.begin(), g.roots.end());
    g.roots = std::move(roots);
  }

  // Indexes the streaming reduces for AddSiblingReduces: a reduce becomes a
  // candidate once the walk (backwards) has passed its first user, and stops
  // being one when the walk reaches it.
  void IndexSiblingReduces() {
    std::map<std::pair<std::vector<int64_t>, std::vector<int64_t>>, int> keys;
    for (const HloInstruction* r : order_) {
      if (!IsStreamingReduce(*r) || r == c_->root()) continue;
      std::vector<int64_t> rd = r->dimensions();
      std::sort(rd.begin(), rd.end());
      auto [it, inserted] = keys.try_emplace(
          {r->operand(0)->shape().dimensions(), std::move(rd)}, static_cast<int>(keys.size()));
      sibling_key_[r] = it->second;
      int first_user = static_cast<int>(order_.size());
      for (const HloInstruction* u : r->users()) {
        if (reachable_.contains(u)) first_user = std::min(first_user, position_.at(u));
      }
      sibling_events_.push_back({first_user, r});
    }
    siblings_.resize(keys.size());
    std::sort(sibling_events_.begin(), sibling_events_.end(),
              [&](const auto& a, const auto& b) {
                return a.first != b.first ? a.first > b.first
                                          : position_.at(a.second) > position_.at(b.second);
              });
  }

  // Before planning the instruction at `pos` (walking backwards).
  void UpdateSiblingCandidates(int pos) {
    while (next_sibling_event_ < sibling_events_.size() &&
           sibling_events_[next_sibling_event_].first > pos) {
      const HloInstruction* r = sibling_events_[next_sibling_event_++].second;
      const int at = position_.at(r);
      if (at < pos) siblings_[sibling_key_.at(r)].insert(at);
    }
    auto key = sibling_key_.find(order_[pos]);
    if (key != sibling_key_.end()) siblings_[key->second].erase(pos);
  }

  void FormGroups() {
    if (options_.enable_fusion) IndexSiblingReduces();
    for (int pos = static_cast<int>(order_.size()) - 1; pos >= 0; --pos) {
      const HloInstruction* x = order_[pos];
      if (options_.enable_fusion) UpdateSiblingCandidates(pos);
      if (x->opcode() == HloOpcode::kParameter || root_group_.contains(x)) continue;
      if (computed_by_.contains(x) && !NeedsOwnValue(x)) continue;
      std::vector<int64_t> dims;
      int gid;
      if (IsStreamingReduce(*x)) {
        gid = NewGroup(x, LoopGroupKind::kReduce);
        dims = x->operand(0)->shape().dimensions();
        if (options_.enable_fusion) AddSiblingReduces(gid);
      } else if (options_.enable_fusion && IsFusibleUpdate(*x) &&
                 IsLoopFusible(*x->operand(1)) &&
                 x->operand(1)->opcode() != HloOpcode::kConstant &&
                 !computed_by_.contains(x->operand(1)) && x->operand(1)->users().size() == 1) {
        gid = NewGroup(x, LoopGroupKind::kUpdate);
        dims = x->operand(1)->shape().dimensions();
      } else if (IsLoopFusible(*x) && x->opcode() != HloOpcode::kConstant) {
        gid = NewGroup(x, LoopGroupKind::kElementwise);
        groups_[gid].members.insert(x);
        dims = x->shape().dimensions();
      } else {
        if (computed_by_.contains(x)) own_step_.insert(x);  // e.g. a constant member
        continue;
      }
      if (options_.enable_fusion) Absorb(gid, dims);
    }
  }

  absl::Status MakeSteps() {
    for (const HloInstruction* x : order_) {
      if (x->opcode() == HloOpcode::kParameter) {
        step_of_[x] = -1;
        continue;
      }
      auto g = root_group_.find(x);
      if (g != root_group_.end()) {
        if (groups_[g->second].root != x) continue;  // an earlier sibling root
      } else if (computed_by_.contains(x) && !own_step_.contains(x)) {
        continue;  // evaluated inside the groups that use it
      }
      Step step;
      step.instr = x;
      step.name = x->name();
      if (g != root_group_.end()) {
        const Group& group = groups_[g->second];
        step.kind = group.reduce() ? StepKind::kLoopReduce : StepKind::kLoop;
        step.update = group.update();
        step.roots = group.roots;
        step.fused.assign(group.members.begin(), group.members.end());
        std::sort(step.fused.begin(), step.fused.end(),
                  [&](const HloInstruction* a, const HloInstruction* b) {
                    return position_.at(a) < position_.at(b);
                  });
        for (const HloInstruction* r : group.roots) {
          if (group.IsSpecialRoot(r)) step.fused.push_back(r);
        }
        if (step.fused.size() > 1) {
          step.name = absl::StrCat("fusion.", x->name(), "(", step.fused.size(),
                                   " ops)");
        }
        LoopGroupReads reads = AnalyzeLoopGroup(group.roots, group.members, group.kind);
        step.reads = std::move(reads.inputs);
        identity_inputs_[x] = std::move(reads.identity_inputs);
      }
      const int s = static_cast<int>(p_->steps.size());
      for (const HloInstruction* y : step.fused) step_of_.try_emplace(y, s);
      step_of_[x] = s;
      p_->steps.push_back(std::move(step));
    }
    return absl::OkStatus();
  }

  void ComputeReads() {
    for (int s = 0; s < static_cast<int>(p_->steps.size()); ++s) {
      const Step& step = p_->steps[s];
      auto read = [&](const HloInstruction* v) {
        if (v == nullptr) return;
        int& lr = last_read_[v];
        lr = std::max(lr, s);
      };
      if (step.kind == StepKind::kLoop || step.kind == StepKind::kLoopReduce) {
        for (const HloInstruction* v : step.reads) read(v);
      } else {
        for (const HloInstruction* v : step.instr->operands()) read(v);
      }
    }
  }

  int LastRead(const HloInstruction* v) const {
    if (v == c_->root()) return kRootRead;
    auto it = last_read_.find(v);
    return it == last_read_.end() ? -1 : it->second;
  }

  // The last read of any value aliasing buffer `b` (kept up to date by
  // AddAlias, so a buffer many values alias is not rescanned per step).
  int BufferLastRead(int b) const {
    const BufferReads& r = buffer_reads_[b];
    return r.by_root ? kRootRead : r.last;
  }

  void AddAlias(int b, const HloInstruction* v) {
    BufferReads& r = buffer_reads_[b];
    r.live = true;
    if (v == c_->root()) {
      r.by_root = true;
    } else {
      r.last = std::max(r.last, LastRead(v));
    }
  }

  bool DiesAt(int b, int s) const {
    return b != kNoBuffer && p_->buffers[b].owned && BufferLastRead(b) == s;
  }

  int NewBuffer(const HloInstruction* def, const Shape& shape, BufferKind kind,
                int step) {
    PlannedBuffer b;
    b.id = static_cast<int>(p_->buffers.size());
    b.bytes = shape.byte_size();
    b.shape = Shape(shape.element_type(), shape.dimensions());
    b.kind = kind;
    b.defined_by = def;
    b.first_use_step = step;
    p_->buffers.push_back(std::move(b));
    buffer_reads_.emplace_back();
    return p_->buffers.back().id;
  }

  std::vector<int> NewLeaves(const HloInstruction* x, int s, bool from_callee) {
    std::vector<int> ids;
    for (const Shape& leaf : LeafShapes(x->shape())) {
      if (!leaf.IsArray()) {
        ids.push_back(kNoBuffer);
        continue;
      }
      int b = NewBuffer(x, leaf, BufferKind::kTemp, s);
      p_->buffers[b].from_callee = from_callee;
      if (!from_callee) p_->steps[s].allocs.push_back(b);
      ids.push_back(b);
    }
    return ids;
  }

  absl::Status AssignBuffers() {
    for (const HloInstruction* param : c_->parameters()) {
      std::vector<int> ids;
      for (const Shape& leaf : LeafShapes(param->shape())) {
        if (!leaf.IsArray()) {
          ids.push_back(kNoBuffer);
          continue;
        }
        int b = NewBuffer(param, leaf, BufferKind::kArgument, -1);
        p_->buffers[b].owned = mode_ == ParamMode::kDonated;
        AddAlias(b, param);
        ids.push_back(b);
      }
      p_->leaves[param] = ids;
      p_->param_leaves.push_back(ids);
    }
    for (int s = 0; s < static_cast<int>(p_->steps.size()); ++s) {
      Step& step = p_->steps[s];
      const HloInstruction* x = step.instr;
      ASSIGN_OR_RETURN(std::vector<int> ids, AssignStep(s, step, x));
      for (int b : ids) {
        if (b != kNoBuffer) AddAlias(b, x);
      }
      p_->leaves[x] = std::move(ids);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<int>> AssignStep(int s, Step& step,
                                              const HloInstruction* x) {
    auto operand_leaves = [&](int64_t i) -> const std::vector<int>& {
      return p_->leaves.at(x->operand(i));
    };
    if (step.kind == StepKind::kLoop && step.update) {
      // As an unfused dynamic-update-slice: in place when operand 0 dies
      // here and the loop reads its buffer nowhere else.
      const int b = operand_leaves(0)[0];
      bool read_elsewhere = false;
      for (const HloInstruction* other : step.reads) {
        if (other != x->operand(0) && other->shape().IsArray() &&
            p_->leaves.at(other)[0] == b) {
          read_elsewhere = true;
        }
      }
      if (!read_elsewhere && DiesAt(b, s)) {
        step.in_place_of = b;
        return std::vector<int>{b};
      }
      return NewLeaves(x, s, false);
    }
    if (step.kind == StepKind::kLoop) {
      for (const HloInstruction* in : identity_inputs_.at(x)) {
        const int b = p_->leaves.at(in)[0];
        bool shared = false;
        for (const HloInstruction* other : step.reads) {
          if (other != in &&
              other->shape().IsArray() && p_->leaves.at(other)[0] == b) {
            shared = true;
          }
        }
        if (!shared && DiesAt(b, s) && p_->buffers[b].bytes == x->shape().byte_size()) {
          step.in_place_of = b;
          return std::vector<int>{b};
        }
      }
      return NewLeaves(x, s, false);
    }
    if (step.kind == StepKind::kLoopReduce) {
      // Sibling roots get their buffers at this step too.
      for (const HloInstruction* r : step.roots) {
        if (r == x) continue;
        std::vector<int> ids = NewLeaves(r, s, false);
        for (int b : ids) {
          if (b != kNoBuffer) AddAlias(b, r);
        }
        p_->leaves[r] = std::move(ids);
      }
      return NewLeaves(x, s, false);
    }
    switch (x->opcode()) {
      case HloOpcode::kGetTupleElement: {
        const Shape& t = x->operand(0)->shape();
        int64_t start = 0;
        for (int64_t i = 0; i < x->tuple_index(); ++i) {
          start += LeafCount(t.tuple_shapes(i));
        }
        const std::vector<int>& all = operand_leaves(0);
        return std::vector<int>(all.begin() + start,
                                all.begin() + start + LeafCount(x->shape()));
      }
      case HloOpcode::kTuple: {
        std::vector<int> ids;
        for (int64_t i = 0; i < x->operand_count(); ++i) {
          const std::vector<int>& l = operand_leaves(i);
          ids.insert(ids.end(), l.begin(), l.end());
        }
        return ids;
      }
      case HloOpcode::kBitcast:
        if (!IsPlainBitcast(x)) return NewLeaves(x, s, false);
        return operand_leaves(0);
      case HloOpcode::kReshape:
      case HloOpcode::kBitcastConvert:
      case HloOpcode::kOptimizationBarrier:
      case HloOpcode::kAddDependency:
      case HloOpcode::kDomain:
        return operand_leaves(0);
      case HloOpcode::kCustomCall:
        if (IsPassThrough(*x)) return operand_leaves(0);
        return NewLeaves(x, s, false);
      case HloOpcode::kCopy: {
        std::vector<int> ids = operand_leaves(0);
        std::vector<Shape> shapes = LeafShapes(x->shape());
        for (size_t i = 0; i < ids.size(); ++i) {
          if (ids[i] == kNoBuffer || DiesAt(ids[i], s)) continue;
          ids[i] = NewBuffer(x, shapes[i], BufferKind::kTemp, s);
          step.allocs.push_back(ids[i]);
        }
        return ids;
      }
      case HloOpcode::kDynamicUpdateSlice: {
        const int b = operand_leaves(0)[0];
        bool read_elsewhere = false;  // the operand also feeds the update/index
        for (int64_t i = 1; i < x->operand_count(); ++i) {
          if (p_->leaves.at(x->operand(i))[0] == b) read_elsewhere = true;
        }
        if (!read_elsewhere && DiesAt(b, s)) {
          step.in_place_of = b;
          return std::vector<int>{b};
        }
        return NewLeaves(x, s, false);
      }
      case HloOpcode::kWhile: {
        ASSIGN_OR_RETURN(const ComputationPlan* body,
                         plan_callee_(x->while_body(), ParamMode::kDonated));
        RETURN_IF_ERROR(
            plan_callee_(x->while_condition(), ParamMode::kBorrowed).status());
        const std::vector<int>& in = operand_leaves(0);
        std::vector<Shape> shapes = LeafShapes(x->shape());
        std::vector<int> ids;
        for (size_t i = 0; i < shapes.size(); ++i) {
          if (!shapes[i].IsArray()) {
            ids.push_back(kNoBuffer);
          } else if (body->passthrough[i]) {
            ids.push_back(in[i]);
          } else {
            const int b = NewBuffer(x, shapes[i], BufferKind::kTemp, s);
            p_->buffers[b].from_callee = true;
            ids.push_back(b);
          }
        }
        return ids;
      }
      case HloOpcode::kCall:
      case HloOpcode::kConditional:
      case HloOpcode::kFusion:
        for (const HloComputation* callee : x->called_computations()) {
          RETURN_IF_ERROR(plan_callee_(callee, ParamMode::kBorrowed).status());
        }
        return NewLeaves(x, s, true);
      default:
        return NewLeaves(x, s, false);
    }
  }

  void FinishLifetimes() {
    const int num_ops = static_cast<int>(p_->steps.size());
    std::vector<int> out = p_->leaves.at(c_->root());
    // Root copies: a callee must return buffers it owns, once each.
    if (!is_entry_) {
      Step copy;
      copy.kind = StepKind::kRootCopy;
      copy.instr = c_->root();
      copy.name = absl::StrCat("root-copy.", c_->name());
      absl::flat_hash_set<int> seen;
      std::vector<Shape> shapes = LeafShapes(c_->root()->shape());
      for (size_t i = 0; i < out.size(); ++i) {
        const int b = out[i];
        if (b == kNoBuffer) continue;
        const bool borrowed = p_->buffers[b].kind == BufferKind::kArgument &&
                              mode_ == ParamMode::kBorrowed;
        if (borrowed || !seen.insert(b).second) {
          const int nb = NewBuffer(c_->root(), shapes[i], BufferKind::kTemp,
                                   num_ops);
          copy.root_copies.push_back({static_cast<int>(i), nb});
          copy.allocs.push_back(nb);
          out[i] = nb;
        }
      }
      if (!copy.root_copies.empty()) p_->steps.push_back(std::move(copy));
    }
    const int n = static_cast<int>(p_->steps.size());
    kRootRead = n;
    p_->output_leaves = out;
    if (mode_ == ParamMode::kDonated) {
      const std::vector<int>& state = p_->param_leaves.empty()
                                          ? std::vector<int>{}
                                          : p_->param_leaves[0];
      p_->passthrough.assign(out.size(), false);
      // Passing through means unchanged: a leaf updated in place keeps its
      // buffer but not its value (the caller must move or copy it in).
      absl::flat_hash_set<int> written;
      for (const Step& st : p_->steps) {
        if (st.in_place_of != kNoBuffer) written.insert(st.in_place_of);
      }
      for (size_t i = 0; i < out.size() && i < state.size(); ++i) {
        if (out[i] != kNoBuffer && out[i] == state[i] && !written.contains(out[i])) {
          p_->passthrough[i] = true;
          p_->buffers[state[i]].owned = false;
        }
      }
    }
    for (PlannedBuffer& b : p_->buffers) {
      b.last_use_step = BufferLastRead(b.id);
      if (b.last_use_step > n) b.last_use_step = n;
    }
    for (int b : out) {
      if (b == kNoBuffer) continue;
      PlannedBuffer& pb = p_->buffers[b];
      if (pb.kind == BufferKind::kTemp) pb.kind = BufferKind::kOutput;
      pb.owned = false;
      pb.last_use_step = n;
    }
    // While steps: hand dying state buffers to the loop, copy the others.
    absl::flat_hash_set<int> moved;
    for (int s = 0; s < num_ops; ++s) {
      Step& step = p_->steps[s];
      if (step.kind != StepKind::kOp || step.instr->opcode() != HloOpcode::kWhile) {
        continue;
      }
      const ComputationPlan& body = *plan_callee_(step.instr->while_body(),
                                                  ParamMode::kDonated).value();
      const std::vector<int>& in = p_->leaves.at(step.instr->operand(0));
      absl::flat_hash_map<int, int> uses;  // how many state leaves share a buffer
      for (int b : in) ++uses[b];
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] == kNoBuffer || body.passthrough[i]) continue;
        const int b = in[i];
        const bool unique = uses[b] == 1;
        const PlannedBuffer& pb = p_->buffers[b];
        if (unique && pb.owned && pb.last_use_step == s) {
          step.moves.push_back(b);
          moved.insert(b);
        } else {
          step.copy_leaves.push_back(static_cast<int>(i));
        }
      }
    }
    for (const PlannedBuffer& b : p_->buffers) {
      if (!b.owned || moved.contains(b.id)) continue;
      if (b.last_use_step >= 0) {
        p_->steps[b.last_use_step].frees.push_back(b.id);
      } else if (b.kind == BufferKind::kArgument) {
        p_->frees_on_entry.push_back(b.id);
      } else if (IsLive(b.id)) {
        p_->steps[b.first_use_step].frees.push_back(b.id);
      }
    }
  }

  // Whether a temp id is actually bound to a value (while pass-through
  // leaves get a placeholder id that is never allocated).
  bool IsLive(int b) const { return buffer_reads_[b].live; }

  const HloComputation* c_;
  ParamMode mode_;
  bool is_entry_;
  PlanOptions options_;
  PlanFn plan_callee_;
  ComputationPlan* p_;
  absl::flat_hash_set<const HloInstruction*> reachable_;
  std::vector<const HloInstruction*> order_;
  absl::flat_hash_map<const HloInstruction*, int> position_;  // in order_
  std::vector<Group> groups_;
  // Group whose root (one of its roots) an instruction is.
  absl::flat_hash_map<const HloInstruction*, int> root_group_;
  // Groups evaluating an instruction (as a member or a root).
  absl::flat_hash_map<const HloInstruction*, std::vector<int>> computed_by_;
  // Members that also need a plain step of their own (constants read by
  // an unfused user).
  absl::flat_hash_set<const HloInstruction*> own_step_;
  absl::flat_hash_map<const HloInstruction*, int> step_of_;
  // Group root -> its in-place candidates (LoopGroupReads::identity_inputs).
  absl::flat_hash_map<const HloInstruction*, std::vector<const HloInstruction*>>
      identity_inputs_;
  absl::flat_hash_map<const HloInstruction*, int> last_read_;
  absl::flat_hash_map<const HloInstruction*, bool> all_users_fusible_;
  // AddSiblingReduces: key of each streaming reduce, the candidates per key
  // (positions), and (first user position, reduce) by decreasing position.
  absl::flat_hash_map<const HloInstruction*, int> sibling_key_;
  std::vector<std::set<int>> siblings_;
  std::vector<std::pair<int, const HloInstruction*>> sibling_events_;
  size_t next_sibling_event_ = 0;
  absl::flat_hash_map<const HloInstruction*, int64_t> reachable_users_;
  // Per buffer: the last step reading a value that aliases it, whether the
  // root is one of them, and whether any value is bound to it at all.
  struct BufferReads {
    int last = -1;
    bool by_root = false;
    bool live = false;
  };
  std::vector<BufferReads> buffer_reads_;
  int kRootRead = 1 << 30;  // root's value is read after the last step
};

}  // namespace

const char* BufferKindName(BufferKind kind) {
  switch (kind) {
    case BufferKind::kArgument: return "argument";
    case BufferKind::kOutput: return "output";
    case BufferKind::kTemp: return "temp";
  }
  return "?";
}

int64_t LeafCount(const Shape& shape) {
  if (!shape.IsTuple()) return 1;
  int64_t n = 0;
  for (const Shape& s : shape.tuple_shapes()) n += LeafCount(s);
  return n;
}

std::vector<Shape> LeafShapes(const Shape& shape) {
  std::vector<Shape> out;
  std::function<void(const Shape&)> walk = [&](const Shape& s) {
    if (s.IsTuple()) {
      for (const Shape& e : s.tuple_shapes()) walk(e);
    } else if (s.IsArray()) {
      out.push_back(s);
    } else {
      out.push_back(Shape());
    }
  };
  walk(shape);
  return out;
}

std::string ComputationPlan::ToString() const {
  std::string out = absl::StrCat("plan ", computation->name(),
                                 mode == ParamMode::kDonated ? " (donated)" : "",
                                 "\n");
  for (size_t s = 0; s < steps.size(); ++s) {
    const Step& st = steps[s];
    absl::StrAppend(&out, "  ", s, ": ", st.name, " allocs={",
                    absl::StrJoin(st.allocs, ","), "} frees={",
                    absl::StrJoin(st.frees, ","), "}");
    if (st.in_place_of != kNoBuffer) absl::StrAppend(&out, " in-place b", st.in_place_of);
    if (!st.moves.empty()) absl::StrAppend(&out, " moves={", absl::StrJoin(st.moves, ","), "}");
    if (!st.copy_leaves.empty()) {
      absl::StrAppend(&out, " copies={", absl::StrJoin(st.copy_leaves, ","), "}");
    }
    out += "\n";
  }
  for (const PlannedBuffer& b : buffers) {
    absl::StrAppend(&out, "  b", b.id, " ", b.shape.ToString(), " ", b.bytes, "B ",
                    BufferKindName(b.kind), " [", b.first_use_step, ",",
                    b.last_use_step, "]", b.owned ? "" : " unowned",
                    b.from_callee ? " from-callee" : "", " %",
                    b.defined_by ? b.defined_by->name() : "?", "\n");
  }
  return out;
}

absl::StatusOr<std::unique_ptr<BufferPlan>> BufferPlan::Build(
    const HloModule& module, const PlanOptions& options) {
  if (module.entry() == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("module ", module.name(), " has no entry computation"));
  }
  auto plan = std::unique_ptr<BufferPlan>(new BufferPlan());
  plan->options_ = options;
  ASSIGN_OR_RETURN(plan->entry_, plan->Plan(module.entry(), ParamMode::kBorrowed));
  return plan;
}

namespace {

using PlanKey = std::pair<const HloComputation*, ParamMode>;

// The (callee, mode) pairs a computation's plan needs planned first: while
// bodies are donated their state, every other callee borrows it. Scalar
// reducers (to_apply of reduce and collectives) are not programs.
std::vector<PlanKey> PlannedCallees(const HloComputation* c) {
  std::vector<PlanKey> out;
  for (const HloInstruction* x : c->ReachablePostOrder()) {
    switch (x->opcode()) {
      case HloOpcode::kWhile:
        out.push_back({x->while_body(), ParamMode::kDonated});
        out.push_back({x->while_condition(), ParamMode::kBorrowed});
        break;
      case HloOpcode::kCall:
      case HloOpcode::kConditional:
      case HloOpcode::kFusion:
        for (const HloComputation* callee : x->called_computations()) {
          out.push_back({callee, ParamMode::kBorrowed});
        }
        break;
      default:
        break;
    }
  }
  return out;
}

}  // namespace

// Plans callees before callers with an explicit stack (a depth-first walk
// of the call graph), so call chains of any depth plan without recursion.
absl::StatusOr<const ComputationPlan*> BufferPlan::Plan(const HloComputation* c,
                                                        ParamMode mode) {
  struct Pending {
    PlanKey key;
    std::vector<PlanKey> callees;
    size_t next = 0;
  };
  std::vector<Pending> stack;
  std::set<PlanKey> in_progress;
  auto visit = [&](const PlanKey& key) -> absl::Status {
    if (key.first == nullptr) {
      return absl::InvalidArgumentError("an instruction calls a missing computation");
    }
    if (plans_.count(key) > 0) return absl::OkStatus();
    if (!in_progress.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("computation ", key.first->name(), " calls itself"));
    }
    stack.push_back({key, PlannedCallees(key.first)});
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(visit({c, mode}));
  while (!stack.empty()) {
    Pending& top = stack.back();
    if (top.next < top.callees.size()) {
      const PlanKey callee = top.callees[top.next++];
      RETURN_IF_ERROR(visit(callee));  // may reallocate `stack`
      continue;
    }
    const PlanKey key = top.key;
    auto plan = std::make_unique<ComputationPlan>();
    const HloComputation* comp = key.first;
    const bool is_entry = comp->parent() != nullptr && comp->parent()->entry() == comp;
    // Every callee is planned by now: the planner only looks them up.
    Planner planner(comp, key.second, is_entry, options_,
                    [this](const HloComputation* callee,
                           ParamMode m) -> absl::StatusOr<const ComputationPlan*> {
                      auto it = plans_.find({callee, m});
                      if (it == plans_.end()) {
                        return absl::InternalError(absl::StrCat(
                            "computation ", callee->name(), " was not planned before its caller"));
                      }
                      return it->second.get();
                    },
                    plan.get());
    RETURN_IF_ERROR(planner.Run());
    plans_[key] = std::move(plan);
    in_progress.erase(key);
    stack.pop_back();
  }
  return plans_.at({c, mode}).get();
}

const ComputationPlan& BufferPlan::Get(const HloComputation* c,
                                       ParamMode mode) const {
  auto it = plans_.find({c, mode});
  if (it == plans_.end()) {  // programmer error
    std::fprintf(stderr, "BufferPlan::Get: computation %s was not planned\n",
                 c->name().c_str());
    std::abort();
  }
  return *it->second;
}

std::vector<const ComputationPlan*> BufferPlan::all() const {
  std::vector<const ComputationPlan*> out;
  for (const auto& [key, plan] : plans_) out.push_back(plan.get());
  return out;
}

}  // namespace tpuoff::hlo

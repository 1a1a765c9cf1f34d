// A module owns its computations, callees before callers; one is the entry.
#ifndef TPUOFF_HLO_IR_MODULE_H_
#define TPUOFF_HLO_IR_MODULE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hlo/ir/computation.h"

namespace tpuoff::hlo {

// input_output_alias entry: output {index} aliases parameter p at {index}.
struct InputOutputAlias {
  std::vector<int64_t> output_index;
  int64_t parameter_number = 0;
  std::vector<int64_t> parameter_index;
  bool must_alias = false;
  bool operator==(const InputOutputAlias&) const = default;
};

class HloModule {
 public:
  explicit HloModule(std::string name) : name_(std::move(name)) {}
  HloModule(const HloModule&) = delete;
  HloModule& operator=(const HloModule&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // Appends a computation (its callees must already be in the module).
  HloComputation* AddComputation(std::unique_ptr<HloComputation> computation,
                                 bool is_entry = false);
  const std::vector<std::unique_ptr<HloComputation>>& computations() const {
    return computations_;
  }
  HloComputation* entry() const { return entry_; }
  void set_entry(HloComputation* entry) { entry_ = entry; }
  HloComputation* FindComputation(const std::string& name) const;
  // Renames instructions whose name an earlier one (entry first, then the
  // other computations in order) already has to `name.N`, as XLA's parser
  // does: names in different computations may repeat in the text.
  void UniquifyInstructionNames();

  const FrontendAttributes& frontend_attributes() const { return frontend_; }
  FrontendAttributes* mutable_frontend_attributes() { return &frontend_; }
  // Output names from the `output_names` frontend attribute (comma-separated),
  // or empty when absent.
  std::vector<std::string> OutputNames() const;
  void SetOutputNames(const std::vector<std::string>& names);

  int64_t num_partitions() const { return num_partitions_; }
  void set_num_partitions(int64_t n) { num_partitions_ = n; }
  int64_t replica_count() const { return replica_count_; }
  void set_replica_count(int64_t n) { replica_count_ = n; }
  // `is_scheduled=true`: the instruction order of each computation is its
  // schedule (the proto carries it as HloScheduleProto).
  bool is_scheduled() const { return is_scheduled_; }
  void set_is_scheduled(bool v) { is_scheduled_ = v; }
  // Entry parameter buffers the caller donates (`buffer_donor=`).
  const std::vector<BufferDonor>& buffer_donors() const { return donors_; }
  std::vector<BufferDonor>* mutable_buffer_donors() { return &donors_; }
  const StackFrameIndex& stack_frame_index() const { return stack_frames_; }
  StackFrameIndex* mutable_stack_frame_index() { return &stack_frames_; }

  const std::vector<InputOutputAlias>& input_output_aliases() const {
    return aliases_;
  }
  std::vector<InputOutputAlias>* mutable_input_output_aliases() {
    return &aliases_;
  }
  // Whether the module's header carried entry_computation_layout / the
  // layouts of the entry's parameters and result (as XLA keeps them).
  const std::optional<std::vector<Shape>>& entry_parameter_layouts() const {
    return entry_param_layouts_;
  }
  void set_entry_layout(std::vector<Shape> params, Shape result) {
    entry_param_layouts_ = std::move(params);
    entry_result_layout_ = std::move(result);
  }
  const Shape& entry_result_layout() const { return entry_result_layout_; }

  int64_t NextUniqueId() { return next_unique_id_++; }

 private:
  std::string name_;
  std::vector<std::unique_ptr<HloComputation>> computations_;
  HloComputation* entry_ = nullptr;
  FrontendAttributes frontend_;
  int64_t num_partitions_ = 1;
  int64_t replica_count_ = 1;
  std::vector<InputOutputAlias> aliases_;
  std::vector<BufferDonor> donors_;
  bool is_scheduled_ = false;
  StackFrameIndex stack_frames_;
  std::optional<std::vector<Shape>> entry_param_layouts_;
  Shape entry_result_layout_;
  int64_t next_unique_id_ = 1;
};

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_IR_MODULE_H_

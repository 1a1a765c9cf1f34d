#include "hlo/ir/opcode.h"

namespace tpuoff::hlo {
namespace {

struct OpcodeInfo {
  absl::string_view name;
  int arity;
  int min_operands;
  OpcodeKind kind;
};

constexpr OpcodeInfo kOpcodeInfo[] = {
#define TPUOFF_OPCODE_INFO(enum_name, text, arity, min_operands, kind) \
  {text, arity, min_operands, OpcodeKind::kind},
    TPUOFF_HLO_OPCODE_LIST(TPUOFF_OPCODE_INFO)
#undef TPUOFF_OPCODE_INFO
};

// A fixed count is its own minimum; a variadic minimum is not negative.
constexpr bool MinimumsConsistent() {
  for (const OpcodeInfo& info : kOpcodeInfo) {
    if (info.arity == kVariadic ? info.min_operands < 0 : info.min_operands != info.arity) {
      return false;
    }
  }
  return true;
}
static_assert(MinimumsConsistent(), "opcode table: min_operands must equal a fixed arity");

}  // namespace

int NumOpcodes() {
  return static_cast<int>(sizeof(kOpcodeInfo) / sizeof(kOpcodeInfo[0]));
}

absl::string_view HloOpcodeString(HloOpcode opcode) {
  return kOpcodeInfo[static_cast<int>(opcode)].name;
}

std::optional<HloOpcode> StringToHloOpcode(absl::string_view name) {
  for (int i = 0; i < NumOpcodes(); ++i) {
    if (kOpcodeInfo[i].name == name) return static_cast<HloOpcode>(i);
  }
  return std::nullopt;
}

int OpcodeArity(HloOpcode opcode) {
  return kOpcodeInfo[static_cast<int>(opcode)].arity;
}

int OpcodeMinOperands(HloOpcode opcode) {
  return kOpcodeInfo[static_cast<int>(opcode)].min_operands;
}

OpcodeKind GetOpcodeKind(HloOpcode opcode) {
  return kOpcodeInfo[static_cast<int>(opcode)].kind;
}

bool IsCollective(HloOpcode opcode) {
  switch (opcode) {
    case HloOpcode::kAllReduce:
    case HloOpcode::kAllGather:
    case HloOpcode::kReduceScatter:
    case HloOpcode::kCollectivePermute:
    case HloOpcode::kAllToAll:
      return true;
    default:
      return false;
  }
}

}  // namespace tpuoff::hlo

#include "runtime/pjrt/handles.h"

#include "absl/strings/str_cat.h"
#include "runtime/pjrt/program.h"

namespace tpuoff::runtime::pjrt {
namespace {

// Runs a destroy call if the plugin has it, dropping its error.
#define TPUOFF_PJRT_DESTROY(FN, T, FIELD, value)                        \
  do {                                                                  \
    T args = TPUOFF_PJRT_ARGS(T);                                       \
    args.FIELD = value;                                                 \
    (void)TPUOFF_PJRT_CALL(p, FN, &args);                               \
  } while (false)

}  // namespace

void Destroy(const Plugin& p, PJRT_Client* x) {
  TPUOFF_PJRT_DESTROY(PJRT_Client_Destroy, PJRT_Client_Destroy_Args, client, x);
}
void Destroy(const Plugin& p, PJRT_LoadedExecutable* x) {
  TPUOFF_PJRT_DESTROY(PJRT_LoadedExecutable_Destroy, PJRT_LoadedExecutable_Destroy_Args,
                      executable, x);
}
void Destroy(const Plugin& p, PJRT_Executable* x) {
  TPUOFF_PJRT_DESTROY(PJRT_Executable_Destroy, PJRT_Executable_Destroy_Args, executable, x);
}
void Destroy(const Plugin& p, PJRT_Buffer* x) {
  TPUOFF_PJRT_DESTROY(PJRT_Buffer_Destroy, PJRT_Buffer_Destroy_Args, buffer, x);
}
void Destroy(const Plugin& p, PJRT_Event* x) {
  TPUOFF_PJRT_DESTROY(PJRT_Event_Destroy, PJRT_Event_Destroy_Args, event, x);
}
void Destroy(const Plugin& p, PJRT_TopologyDescription* x) {
  TPUOFF_PJRT_DESTROY(PJRT_TopologyDescription_Destroy, PJRT_TopologyDescription_Destroy_Args,
                      topology, x);
}

absl::Status AwaitAndDestroy(const Plugin& p, PJRT_Event* event, const char* what) {
  if (event == nullptr) return absl::OkStatus();
  Owned<PJRT_Event> owned(&p, event);
  PJRT_Event_Await_Args args = TPUOFF_PJRT_ARGS(PJRT_Event_Await_Args);
  args.event = event;
  absl::Status s = TPUOFF_PJRT_CALL(p, PJRT_Event_Await, &args);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  return absl::OkStatus();
}

absl::StatusOr<PJRT_Buffer_Type> BufferTypeOf(hlo::PrimitiveType type) {
  using hlo::PrimitiveType;
  switch (type) {
    case PrimitiveType::kPred: return PJRT_Buffer_Type_PRED;
    case PrimitiveType::kS8: return PJRT_Buffer_Type_S8;
    case PrimitiveType::kS16: return PJRT_Buffer_Type_S16;
    case PrimitiveType::kS32: return PJRT_Buffer_Type_S32;
    case PrimitiveType::kS64: return PJRT_Buffer_Type_S64;
    case PrimitiveType::kU8: return PJRT_Buffer_Type_U8;
    case PrimitiveType::kU16: return PJRT_Buffer_Type_U16;
    case PrimitiveType::kU32: return PJRT_Buffer_Type_U32;
    case PrimitiveType::kU64: return PJRT_Buffer_Type_U64;
    case PrimitiveType::kF16: return PJRT_Buffer_Type_F16;
    case PrimitiveType::kF32: return PJRT_Buffer_Type_F32;
    case PrimitiveType::kF64: return PJRT_Buffer_Type_F64;
    case PrimitiveType::kBF16: return PJRT_Buffer_Type_BF16;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "PJRT buffers of type ", hlo::PrimitiveTypeName(type), " are not supported"));
  }
}

absl::StatusOr<CompiledMemoryStats> GetMemoryStats(const Plugin& p, PJRT_Executable* exe) {
  PJRT_Executable_GetCompiledMemoryStats_Args args =
      TPUOFF_PJRT_ARGS(PJRT_Executable_GetCompiledMemoryStats_Args);
  args.executable = exe;
  if (absl::Status s = TPUOFF_PJRT_CALL(p, PJRT_Executable_GetCompiledMemoryStats, &args);
      !s.ok()) {
    return s;
  }
  CompiledMemoryStats stats;
  stats.argument_bytes = args.argument_size_in_bytes;
  stats.output_bytes = args.output_size_in_bytes;
  stats.alias_bytes = args.alias_size_in_bytes;
  stats.temp_bytes = args.temp_size_in_bytes;
  stats.generated_code_bytes = args.generated_code_size_in_bytes;
  stats.peak_bytes = args.peak_memory_in_bytes;
  return stats;
}

absl::StatusOr<std::string> GetOptimizedModule(const Plugin& p, PJRT_Executable* exe) {
  PJRT_Program program = TPUOFF_PJRT_ARGS(PJRT_Program);
  PJRT_Executable_OptimizedProgram_Args args =
      TPUOFF_PJRT_ARGS(PJRT_Executable_OptimizedProgram_Args);
  args.executable = exe;
  args.program = &program;
  // First call: the size; second: the bytes into our buffer.
  if (absl::Status s = TPUOFF_PJRT_CALL(p, PJRT_Executable_OptimizedProgram, &args); !s.ok()) {
    return s;
  }
  std::string code(program.code_size, '\0');
  program.code = code.data();
  if (absl::Status s = TPUOFF_PJRT_CALL(p, PJRT_Executable_OptimizedProgram, &args); !s.ok()) {
    return s;
  }
  const std::string format =
      program.format ? std::string(program.format, program.format_size) : "";
  return ModuleProtoFromProgram(code, format);
}

}  // namespace tpuoff::runtime::pjrt

// jaxlib's CPU LAPACK custom-calls (`lapack_?getrf_ffi`, `lapack_?potrf_ffi`,
// ... API_VERSION_TYPED_FFI, attributes in backend_config as an MLIR
// dictionary `{uplo = 76 : ui8}`), run on Debian's LAPACK with jaxlib's
// output conventions: the factor in the operand's place, LAPACK's 1-based
// pivots and its info codes, one matrix per batch element. The emulator's
// arrays are logical row-major; each matrix is moved to column-major for
// LAPACK and back.
#ifndef TPUOFF_RUNTIME_EMULATOR_OPS_LAPACK_H_
#define TPUOFF_RUNTIME_EMULATOR_OPS_LAPACK_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hlo/ir/instruction.h"

namespace tpuoff::runtime {

// Whether `target` names one of jaxlib's LAPACK custom-calls we run.
bool IsLapackTarget(absl::string_view target);

// Runs a LAPACK custom-call; `in` / `out` are the operand and result leaves.
absl::Status LapackCustomCall(const hlo::HloInstruction& instr,
                              const std::vector<const void*>& in, const std::vector<void*>& out);

namespace lapack_internal {

// The FFI attributes of backend_config: `{name = 76 : ui8, flag = true}`.
absl::StatusOr<std::map<std::string, int64_t>> ParseFfiAttributes(absl::string_view config);

// Shape of a batch of matrices: prod(dims[:-2]) matrices of rows x cols.
struct Batch {
  int64_t count = 1, rows = 0, cols = 0;
};

// Everything a routine needs about the call.
struct Call {
  const hlo::HloInstruction* instr;
  std::string routine;  // "getrf", "potrf", ...
  std::map<std::string, int64_t> attrs;
  const std::vector<const void*>* in;
  const std::vector<void*>* out;
  std::vector<hlo::Shape> operand_shapes;  // array leaves of the operands
  std::vector<hlo::Shape> result_shapes;   // array leaves of the result
  absl::Status Error(absl::string_view msg) const;
  absl::StatusOr<char> CharAttr(const std::string& name, absl::string_view allowed) const;
};

// Eigen/SVD/Schur/Hessenberg/tridiagonal reduction (ops_lapack_eig.cc).
template <typename T>
absl::Status RunEigenRoutine(const Call& call, bool* handled);

}  // namespace lapack_internal
}  // namespace tpuoff::runtime

#endif  // TPUOFF_RUNTIME_EMULATOR_OPS_LAPACK_H_

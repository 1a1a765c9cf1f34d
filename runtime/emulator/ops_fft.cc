// fft (FFT, IFFT, RFFT, IRFFT over the last 1-3 dimensions, c64/c128) on
// FFTW3. Unnormalised forward transforms, inverse ones scaled by 1/N as XLA
// does; every leading dimension is a batch (one FFTW "many" plan).
#include <fftw3.h>

#include <complex>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/emulator/ops_extra.h"

namespace tpuoff::runtime {
namespace {

using hlo::FftType;
using hlo::HloInstruction;
using hlo::PrimitiveType;

// FFTW's planner is not thread-safe; execution of a plan is.
std::mutex& PlannerMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

// The float and double FFTW APIs behind one interface.
template <typename R>
struct Fftw;
template <>
struct Fftw<float> {
  using Plan = fftwf_plan;
  using Complex = fftwf_complex;
  static Plan Dft(int rank, const int* n, int howmany, Complex* in, Complex* out, int dist,
                  int sign) {
    return fftwf_plan_many_dft(rank, n, howmany, in, nullptr, 1, dist, out, nullptr, 1, dist, sign,
                               FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
  static Plan R2c(int rank, const int* n, int howmany, float* in, Complex* out, int idist,
                  int odist) {
    return fftwf_plan_many_dft_r2c(rank, n, howmany, in, nullptr, 1, idist, out, nullptr, 1,
                                   odist, FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
  static Plan C2r(int rank, const int* n, int howmany, Complex* in, float* out, int idist,
                  int odist) {
    return fftwf_plan_many_dft_c2r(rank, n, howmany, in, nullptr, 1, idist, out, nullptr, 1,
                                   odist, FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
  static void Execute(Plan p) { fftwf_execute(p); }
  static void Destroy(Plan p) { fftwf_destroy_plan(p); }
};
template <>
struct Fftw<double> {
  using Plan = fftw_plan;
  using Complex = fftw_complex;
  static Plan Dft(int rank, const int* n, int howmany, Complex* in, Complex* out, int dist,
                  int sign) {
    return fftw_plan_many_dft(rank, n, howmany, in, nullptr, 1, dist, out, nullptr, 1, dist, sign,
                              FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
  static Plan R2c(int rank, const int* n, int howmany, double* in, Complex* out, int idist,
                  int odist) {
    return fftw_plan_many_dft_r2c(rank, n, howmany, in, nullptr, 1, idist, out, nullptr, 1,
                                  odist, FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
  static Plan C2r(int rank, const int* n, int howmany, Complex* in, double* out, int idist,
                  int odist) {
    return fftw_plan_many_dft_c2r(rank, n, howmany, in, nullptr, 1, idist, out, nullptr, 1,
                                  odist, FFTW_ESTIMATE | FFTW_UNALIGNED);
  }
  static void Execute(Plan p) { fftw_execute(p); }
  static void Destroy(Plan p) { fftw_destroy_plan(p); }
};

template <typename R>
absl::Status RunFft(const HloInstruction& instr, const void* in, void* out) {
  using F = Fftw<R>;
  using C = std::complex<R>;
  const hlo::HloAttributes& a = instr.attrs();
  const int rank = static_cast<int>(a.fft_length.size());
  std::vector<int> n(a.fft_length.begin(), a.fft_length.end());
  int64_t points = 1;  // elements of one transform (real side)
  for (int64_t l : a.fft_length) points *= l;
  const hlo::Shape& out_shape = instr.shape();
  const hlo::Shape& in_shape = instr.operand(0)->shape();
  const int64_t in_elems = in_shape.num_elements(), out_elems = out_shape.num_elements();
  if (in_elems == 0 || out_elems == 0) return absl::OkStatus();
  // The complex side of a real transform: the last length halved.
  const int64_t half = points / a.fft_length.back() * (a.fft_length.back() / 2 + 1);
  const int64_t per = a.fft_type == FftType::kFft || a.fft_type == FftType::kIfft ? points
                      : a.fft_type == FftType::kRfft                            ? points
                                                                                : half;
  const int64_t batch = in_elems / per;
  if (batch > (int64_t{1} << 31) - 1 || points > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(absl::StrCat("fft %", instr.name(), " is too large"));
  }
  typename F::Plan plan = nullptr;
  std::vector<C> scratch;
  {
    std::lock_guard<std::mutex> lock(PlannerMutex());
    switch (a.fft_type) {
      case FftType::kFft:
      case FftType::kIfft: {
        // Out-of-place complex transforms preserve their input (FFTW's
        // default), so the operand may be read through a non-const pointer.
        auto* src = reinterpret_cast<typename F::Complex*>(const_cast<void*>(in));
        plan = F::Dft(rank, n.data(), static_cast<int>(batch), src,
                      static_cast<typename F::Complex*>(out), static_cast<int>(points),
                      a.fft_type == FftType::kFft ? FFTW_FORWARD : FFTW_BACKWARD);
        break;
      }
      case FftType::kRfft:
        plan = F::R2c(rank, n.data(), static_cast<int>(batch), const_cast<R*>(static_cast<const R*>(in)),
                      static_cast<typename F::Complex*>(out), static_cast<int>(points),
                      static_cast<int>(half));
        break;
      case FftType::kIrfft:
        // c2r destroys its input: transform a copy.
        scratch.assign(static_cast<const C*>(in), static_cast<const C*>(in) + in_elems);
        plan = F::C2r(rank, n.data(), static_cast<int>(batch),
                      reinterpret_cast<typename F::Complex*>(scratch.data()), static_cast<R*>(out),
                      static_cast<int>(half), static_cast<int>(points));
        break;
    }
  }
  if (plan == nullptr) {
    return absl::InternalError(absl::StrCat("FFTW could not plan fft %", instr.name()));
  }
  F::Execute(plan);
  {
    std::lock_guard<std::mutex> lock(PlannerMutex());
    F::Destroy(plan);
  }
  if (a.fft_type == FftType::kIfft) {
    C* o = static_cast<C*>(out);
    const R scale = R(1) / static_cast<R>(points);
    for (int64_t i = 0; i < out_elems; ++i) o[i] *= scale;
  } else if (a.fft_type == FftType::kIrfft) {
    R* o = static_cast<R*>(out);
    const R scale = R(1) / static_cast<R>(points);
    for (int64_t i = 0; i < out_elems; ++i) o[i] *= scale;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FftKernel(const HloInstruction& instr, const void* in, void* out) {
  const PrimitiveType t = instr.operand(0)->shape().element_type();
  if (t == PrimitiveType::kF32 || t == PrimitiveType::kC64) return RunFft<float>(instr, in, out);
  return RunFft<double>(instr, in, out);
}

}  // namespace tpuoff::runtime

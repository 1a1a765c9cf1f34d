#include "tools/cli/bench_floor.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hlo/ir/float16.h"
#include "runtime/cpu/host_memory.h"
#include "tools/cli/bench_floor_rows.h"

namespace tpuoff::tools {
namespace {

using hlo::Literal;
using hlo::PrimitiveType;

// The row kernels for the logits' storage type.
inline void Forward(const FloorRowKernels& k, const float* z, int64_t v, float scale,
                    FloorRowStats* s) {
  k.forward_f32(z, v, scale, s);
}
inline void Forward(const FloorRowKernels& k, const uint16_t* z, int64_t v, float scale,
                    FloorRowStats* s) {
  k.forward_bf16(z, v, scale, s);
}
inline void Backward(const FloorRowKernels& k, const float* z, int64_t v, float scale, float lse,
                     float c, int64_t y, float* out) {
  k.backward_f32(z, v, scale, lse, c, y, out);
}
inline void Backward(const FloorRowKernels& k, const uint16_t* z, int64_t v, float scale,
                     float lse, float c, int64_t y, uint16_t* out) {
  k.backward_bf16(z, v, scale, lse, c, y, out);
}
inline float LoadOne(const float* p) { return *p; }
inline float LoadOne(const uint16_t* p) { return hlo::Bf16ToF32(*p); }

const Literal* FindArg(const hlo::HloComputation& params, absl::Span<const Literal> args,
                       const std::string& name) {
  for (int64_t i = 0; i < params.num_parameters() && i < static_cast<int64_t>(args.size());
       ++i) {
    if (params.parameter(i)->name() == name) return &args[i];
  }
  return nullptr;
}

int Threads(int n) { return n > 0 ? n : omp_get_max_threads(); }

template <typename S>
absl::StatusOr<FloorOutputs> RunFloorTyped(const kernels::GrpoConfig& c,
                                           const hlo::HloComputation& params,
                                           absl::Span<const Literal> args,
                                           const FloorOptions& o) {
  const Literal* logits = FindArg(params, args, "logits");
  if (logits == nullptr || logits->shape().rank() != 3) {
    return absl::InvalidArgumentError("bench floor: no [B,T,V] logits argument");
  }
  const int64_t rows = c.batch * c.seq, v = c.vocab;
  const S* z = logits->data<S>();
  const float scale = static_cast<float>(1.0 / c.temperature);
  FloorOutputs out;
  out.entropy.resize(rows);
  out.lse.resize(rows);
  const int nt = Threads(o.num_threads);
  const FloorRowKernels& k = FloorRowKernelsForCpu();
  if (o.entropy_only) {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      FloorRowStats s;
      Forward(k, z + r * v, v, scale, &s);
      out.entropy[r] = std::log(s.sum) - s.usum / s.sum;
      out.lse[r] = s.ref + std::log(s.sum);
    }
    return out;
  }
  const Literal* ids = FindArg(params, args, "chosen_ids");
  const Literal* mask = FindArg(params, args, "completion_mask");
  const Literal* adv = FindArg(params, args, "advantages");
  const Literal* old = FindArg(params, args, "old_logp");
  const Literal* ref = FindArg(params, args, "ref_logp");
  const Literal* count = FindArg(params, args, "total_valid_tokens");
  if (ids == nullptr || mask == nullptr || adv == nullptr || (!c.on_policy && old == nullptr) ||
      (c.beta != 0 && ref == nullptr) || (c.token_count_input && count == nullptr)) {
    return absl::InvalidArgumentError("bench floor: a GRPO argument is missing");
  }
  const int32_t* y = ids->data<int32_t>();
  const float* m = mask->data<float>();
  out.logp.resize(rows);
  out.per_token_loss.resize(rows);
  // Forward: one pass per row.
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    FloorRowStats s;
    Forward(k, z + r * v, v, scale, &s);
    const float log_sum = std::log(s.sum);
    out.lse[r] = s.ref + log_sum;
    out.entropy[r] = log_sum - s.usum / s.sum;
    const float chosen = y[r] >= 0 && y[r] < v ? LoadOne(z + r * v + y[r]) * scale : 0.0f;
    out.logp[r] = chosen - out.lse[r];
  }
  // Per-token terms (B*T scalars): weights, ratio, clipped loss, dloss/dlogp.
  std::vector<float> weight(rows), coef(rows);
  double n_tokens = 0;
  for (int64_t r = 0; r < rows; ++r) n_tokens += m[r];
  for (int64_t b = 0; b < c.batch; ++b) {
    double per_seq = 0;
    for (int64_t t = 0; t < c.seq; ++t) per_seq += m[b * c.seq + t];
    for (int64_t t = 0; t < c.seq; ++t) {
      const int64_t r = b * c.seq + t;
      switch (c.loss_type) {
        case kernels::LossType::kTokenMean: {
          const double n = c.token_count_input ? count->data<float>()[0] : n_tokens;
          weight[r] = static_cast<float>(m[r] / std::max(n, 1.0));
          break;
        }
        case kernels::LossType::kSequenceMean:
          weight[r] = static_cast<float>(m[r] / (std::max(per_seq, 1.0) * c.batch));
          break;
        case kernels::LossType::kConstant:
          weight[r] = static_cast<float>(
              m[r] / (static_cast<double>(c.batch) * c.max_len.value_or(c.seq)));
          break;
      }
    }
  }
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float a = adv->data<float>()[r / c.seq];
    const float logp = out.logp[r];
    const float ratio = c.on_policy ? 1.0f : std::exp(logp - old->data<float>()[r]);
    const float r_clip = std::min(std::max(ratio, static_cast<float>(1 - c.eps_low)),
                                  static_cast<float>(1 + c.eps_high));
    const float r_d = c.delta ? std::min(ratio, static_cast<float>(*c.delta)) : ratio;
    const float unclipped = r_d * a, clipped = r_clip * a;
    float ptl = -std::min(unclipped, clipped);
    bool active = clipped >= unclipped;
    if (c.delta) active = active && ratio <= static_cast<float>(*c.delta);
    float s = active ? -(a * ratio) : 0.0f;
    if (c.beta != 0) {
      const float d = ref->data<float>()[r] - logp;
      ptl += static_cast<float>(c.beta) * (std::exp(d) - d - 1.0f);
      s += static_cast<float>(c.beta) * (1.0f - std::exp(d));
    }
    out.per_token_loss[r] = ptl;
    loss += static_cast<double>(weight[r]) * ptl;
    coef[r] = weight[r] != 0 ? weight[r] * s * scale : 0.0f;
  }
  out.loss = loss;
  if (!o.backward) return out;
  // Backward: one pass per row, writing dlogits.
  const size_t bytes = static_cast<size_t>(logits->raw_size());
  out.dlogits.reset(runtime::HostAlloc(bytes));
  if (out.dlogits == nullptr) return absl::ResourceExhaustedError("bench floor: out of memory");
  out.dlogits_shape = logits->shape();
  S* dl = static_cast<S*>(out.dlogits.get());
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    Backward(k, z + r * v, v, scale, out.lse[r], coef[r], y[r], dl + r * v);
  }
  return out;
}

int64_t ReadStatusKb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(f, line)) {
    if (line.compare(0, n, key) == 0) return std::atoll(line.c_str() + n) * 1024;
  }
  return 0;
}

}  // namespace

void FreeDeleter::operator()(void* p) const { runtime::HostFree(p); }

absl::StatusOr<FloorOutputs> RunFloor(const kernels::GrpoConfig& config,
                                      const hlo::HloComputation& params,
                                      absl::Span<const Literal> args,
                                      const FloorOptions& options) {
  if (config.temperature_mode == kernels::TemperatureMode::kPostLse &&
      config.temperature != 1.0) {
    return absl::UnimplementedError(
        "bench floor: temperature_mode=post_lse with temperature != 1 is not covered");
  }
  switch (config.logits_type) {
    case PrimitiveType::kF32:
      return RunFloorTyped<float>(config, params, args, options);
    case PrimitiveType::kBF16:
      return RunFloorTyped<uint16_t>(config, params, args, options);
    default:
      return absl::UnimplementedError("bench floor: logits must be f32 or bf16");
  }
}

Bandwidth MeasureBandwidth(int64_t bytes, int num_threads, int reps) {
  const int64_t n = std::max<int64_t>(bytes / 8, 1024);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
  const int nt = Threads(num_threads);
  auto now = [] { return omp_get_wtime(); };
  // First touch in parallel, as the threads will use it.
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<uint64_t>(i);
  double best_read = 1e30, best_write = 1e30;
  uint64_t sink = 0;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    double t0 = now();
    uint64_t total = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(+ : total)
    for (int64_t i = 0; i < n; ++i) total += buf[i];
    best_read = std::min(best_read, now() - t0);
    sink += total;
    t0 = now();
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<uint64_t>(r);
    best_write = std::min(best_write, now() - t0);
  }
  if (sink == 42) std::fputs("", stderr);  // keeps the reads alive
  Bandwidth bw;
  bw.read_bytes_per_s = static_cast<double>(n * 8) / best_read;
  bw.write_bytes_per_s = static_cast<double>(n * 8) / best_write;
  return bw;
}

double BandwidthBoundSeconds(const Bandwidth& bw, double read_bytes, double write_bytes) {
  double s = 0;
  if (bw.read_bytes_per_s > 0) s += read_bytes / bw.read_bytes_per_s;
  if (bw.write_bytes_per_s > 0) s += write_bytes / bw.write_bytes_per_s;
  return s;
}

int64_t PeakRssBytes() { return ReadStatusKb("VmHWM:"); }
int64_t CurrentRssBytes() { return ReadStatusKb("VmRSS:"); }

bool ResetPeakRss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

double MaxScaledDifference(const void* a, const Literal& b, double atol, double rtol) {
  const int64_t n = b.num_elements();
  const PrimitiveType t = b.shape().element_type();
  auto value = [&](const void* base, int64_t i) -> double {
    switch (t) {
      case PrimitiveType::kF32: return static_cast<const float*>(base)[i];
      case PrimitiveType::kBF16: return hlo::Bf16ToF32(static_cast<const uint16_t*>(base)[i]);
      default: return 0;
    }
  };
  double worst = 0;
#pragma omp parallel for schedule(static) reduction(max : worst)
  for (int64_t i = 0; i < n; ++i) {
    const double x = value(a, i), y = value(b.raw(), i);
    const double d = std::fabs(x - y) / (atol + rtol * std::fabs(y));
    worst = std::max(worst, std::isnan(d) ? INFINITY : d);
  }
  return worst;
}

}  // namespace tpuoff::tools

#include "tools/io/random_inputs.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hlo/ir/instruction.h"
#include "hlo/ir/float16.h"
#include "hlo/ir/status_macros.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/emulator/gemm.h"
#include "tools/io/normal_fill.h"

namespace tpuoff::tools {
namespace {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;

// splitmix64: tiny, seedable, and identical on every platform (unlike the
// std:: distributions, whose algorithms are implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return (Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Normal() {  // Box-Muller
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  int64_t Below(int64_t n) { return static_cast<int64_t>(Next() % n); }

 private:
  uint64_t state_;
};

uint64_t StreamSeed(const RandomInputOptions& o, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  Rng mix(o.seed ^ h ^ (static_cast<uint64_t>(o.device) * 0x9e3779b97f4a7c15ull));
  return mix.Next();
}

// Fills `n` elements in fixed chunks, each from its own stream derived from
// (stream seed, chunk index): parallel, and the values do not depend on the
// thread count. fill_one(i, rng) sets element i.
constexpr int64_t kChunk = kRandomChunk;
uint64_t ChunkSeed(uint64_t stream, int64_t chunk) { return RandomChunkSeed(stream, chunk); }

template <typename F>
void FillChunked(int64_t n, uint64_t stream, F&& fill_one) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    Rng rng(ChunkSeed(stream, c));
    const int64_t end = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; ++i) fill_one(i, rng);
  }
}

void FillGeneric(Literal& lit, uint64_t stream) {
  if (lit.shape().IsTuple()) {
    int64_t k = 0;
    for (Literal& e : *lit.mutable_tuple_elements()) FillGeneric(e, ChunkSeed(~stream, k++));
    return;
  }
  if (!lit.shape().IsArray()) return;
  const PrimitiveType t = lit.shape().element_type();
  FillChunked(lit.num_elements(), stream, [&](int64_t i, Rng& rng) {
    if (hlo::IsFloatingPoint(t) || hlo::IsComplex(t)) {  // complex: real part
      lit.SetFromDouble(i, 2.0 * rng.Uniform() - 1.0);
    } else if (t == PrimitiveType::kPred) {
      lit.SetFromInt64(i, static_cast<int64_t>(rng.Next() >> 63));
    } else {
      lit.SetFromInt64(i, rng.Below(8));
    }
  });
}

// Per-row log-sum-exp and chosen log-probability of a [B,T,V] logits
// literal, in the kernel's temperature convention.
struct RowStats {
  std::vector<double> lse;
  std::vector<double> logp;
  std::vector<double> entropy;  // of softmax(z/τ), both temperature modes
};

// Row r of a [rows, v] float literal as f32.
void LoadRow(const Literal& logits, int64_t r, int64_t v, float* x) {
  const int64_t base = r * v;
  switch (logits.shape().element_type()) {
    case PrimitiveType::kF32:
      std::memcpy(x, logits.data<float>() + base, v * sizeof(float));
      return;
    case PrimitiveType::kBF16: {
      const uint16_t* s = logits.data<uint16_t>() + base;
      for (int64_t j = 0; j < v; ++j) x[j] = hlo::Bf16ToF32(s[j]);
      return;
    }
    default:
      for (int64_t j = 0; j < v; ++j) x[j] = static_cast<float>(logits.GetAsDouble(base + j));
  }
}

namespace simd = runtime::simd;

// lse of one row of v values (f32 or bf16) times `scale`, and the scaled
// value at `chosen`: two passes over the row, the second in blocks that stay
// in L1 (exps of a block, then their sums). The sums are f64 over
// kSumLanes lanes, lane l adding the elements j with j % kSumLanes == l in
// order and the last v % kSumLanes elements added to lane 0: the same order
// whatever the blocking. 32 lanes: four independent vector add chains (with
// eight lanes the adds' latency bounded the pass).
// `scaled` (may be null) receives the row times `scale`.
template <typename Src>
void RowLse(const Src* row, int64_t v, float scale, float* scaled, int64_t chosen,
            double* lse, float* chosen_value) {
  const simd::VF vscale = simd::Splat(scale);
  simd::VF vmax = simd::Splat(-INFINITY);
  int64_t k = 0;
  for (; k + simd::kLanes <= v; k += simd::kLanes) {
    const simd::VF xs = LoadScaled(row, k, vscale);
    if (scaled != nullptr) simd::Store(scaled + k, xs);
    vmax = simd::Max(vmax, xs);
  }
  float lane_max = simd::ReduceMax(vmax);
  for (; k < v; ++k) {
    const float xs = ScaledAt(row, k, scale);
    if (scaled != nullptr) scaled[k] = xs;
    lane_max = xs > lane_max ? xs : lane_max;
  }
  const float mx = lane_max;
  const simd::VF vmx = simd::Splat(mx);
  constexpr int64_t kSumLanes = 32;
  constexpr int64_t kBlock = 2048;  // a multiple of kSumLanes and of kLanes
  alignas(64) float e[kBlock];
  alignas(64) double part[kSumLanes] = {};
  for (int64_t b = 0; b < v; b += kBlock) {
    const int64_t len = std::min(kBlock, v - b);
    int64_t i = 0;
    for (; i + 2 * simd::kLanes <= len; i += 2 * simd::kLanes) {
      simd::StoreExpV2(LoadScaled(row, b + i, vscale) - vmx,
                       LoadScaled(row, b + i + simd::kLanes, vscale) - vmx, e + i);
    }
    for (; i + simd::kLanes <= len; i += simd::kLanes) {
      simd::Store(e + i, simd::ExpV(LoadScaled(row, b + i, vscale) - vmx));
    }
    if (i < len) {  // the row's last few values, one partial vector
      float tail[simd::kLanes];
      for (int l = 0; l < simd::kLanes; ++l) {
        tail[l] = i + l < len ? ScaledAt(row, b + i + l, scale) : mx;
      }
      simd::StorePartial(e + i, simd::ExpV(simd::Load(tail) - vmx), len - i);
    }
    int64_t j = 0;
    for (; j + kSumLanes <= len; j += kSumLanes) {
      for (int l = 0; l < kSumLanes; ++l) part[l] += e[j + l];
    }
    for (; j < len; ++j) part[0] += e[j];  // only in the last block
  }
  double sum = 0;
  for (double p : part) sum += p;
  *lse = mx + std::log(sum);
  *chosen_value = ScaledAt(row, chosen, scale);
}

// `known_lse`: the rows' lse, when FillNormal computed it as it generated
// the logits (empty otherwise).
RowStats ComputeRowStats(const Literal& logits, const Literal& ids,
                         const RandomInputOptions& o, bool with_entropy,
                         const std::vector<double>& known_lse) {
  const int64_t v = logits.shape().dimensions().back();
  const int64_t rows = logits.num_elements() / std::max<int64_t>(v, 1);
  const float scale = static_cast<float>(o.post_lse ? 1.0 : 1.0 / o.temperature);
  RowStats s;
  s.lse.resize(rows);
  s.logp.resize(rows);
  s.entropy.resize(rows);
  // The entropy's domain z/τ differs from the lse's (z) in post_lse mode.
  const double entropy_rescale = o.post_lse ? 1.0 / o.temperature : 1.0;
  const PrimitiveType type = logits.shape().element_type();
  // f32 and bf16 rows are read in place; other types, and rows whose
  // entropy is needed too, go through a scaled f32 copy of the row.
  const bool direct = !with_entropy && (type == PrimitiveType::kF32 || type == PrimitiveType::kBF16);
#pragma omp parallel if (rows > 1)
  {
    std::vector<float> x(direct ? 0 : v);
    std::vector<float> raw(type == PrimitiveType::kF32 || type == PrimitiveType::kBF16 ? 0 : v);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t y = std::clamp<int64_t>(ids.GetAsInt64(r), 0, v - 1);
      float chosen = 0;
      if (direct && static_cast<int64_t>(known_lse.size()) == rows) {
        s.lse[r] = known_lse[r];
        chosen = type == PrimitiveType::kBF16 ? ScaledAt(logits.data<uint16_t>() + r * v, y, scale)
                                              : ScaledAt(logits.data<float>() + r * v, y, scale);
      } else if (direct && type == PrimitiveType::kBF16) {
        RowLse(logits.data<uint16_t>() + r * v, v, scale, nullptr, y, &s.lse[r], &chosen);
      } else if (direct) {
        RowLse(logits.data<float>() + r * v, v, scale, nullptr, y, &s.lse[r], &chosen);
      } else if (type == PrimitiveType::kF32) {
        RowLse(logits.data<float>() + r * v, v, scale, x.data(), y, &s.lse[r], &chosen);
      } else if (type == PrimitiveType::kBF16) {
        RowLse(logits.data<uint16_t>() + r * v, v, scale, x.data(), y, &s.lse[r], &chosen);
      } else {
        LoadRow(logits, r, v, raw.data());
        RowLse(static_cast<const float*>(raw.data()), v, scale, x.data(), y, &s.lse[r], &chosen);
      }
      if (with_entropy) {
        // H = lse(u) − Σ softmax(u)·u with u = x·entropy_rescale, centred.
        double mu = -INFINITY, se = 0, sue = 0;
        for (int64_t k = 0; k < v; ++k) mu = std::max(mu, x[k] * entropy_rescale);
        for (int64_t k = 0; k < v; ++k) {
          const double d = x[k] * entropy_rescale - mu;
          const double ek = std::exp(d);
          se += ek;
          sue += ek * d;
        }
        s.entropy[r] = std::log(se) - sue / se;
      }
      s.logp[r] = chosen - s.lse[r];
      if (o.post_lse) s.logp[r] /= o.temperature;
    }
  }
  return s;
}

// The fused kernel's derived inputs (it takes hidden [.., H] and lm_head
// [H, V], not logits). Up to kFusedExactMacs multiply-adds (and a product and
// an lm_head of at most kFusedExactLogits values each) the logits
// hidden·lm_head are formed (runtime::Gemm, f32 accumulation) and their row
// statistics taken exactly, as for a logits kernel.
// Beyond that (the seed shapes: 1.2e11 multiply-adds at T=512, H=1536,
// V=151936) each row's chosen logit z_y is still exact (a length-H dot), and
// its lse and entropy are those of V normal logits with the row's variance:
// lm_head is generated N(0, 1/H), so given the row h the logits are
// N(0, |h|²/H), and for u ~ N(0, s²) lse(u) ≈ log V + s²/2 and the entropy
// ≈ log V − s²/2 (the softmax tilt moves u's mean to s²). The relative error
// of Σ exp(u) is about sqrt((exp(s²) − 1) / V): 0.3% at s = 1, V = 151936,
// well below the 0.1 noise old_logp gets. (Before, these inputs were
// uniform numbers unrelated to the logits: the ratio was ~e^-9 and a
// sequence with a negative advantage had all-zero gradients.)
constexpr int64_t kFusedExactMacs = int64_t{1} << 30;
constexpr int64_t kFusedExactLogits = int64_t{1} << 26;

// f32 [rows, v] = hidden [rows, h] · lm_head [h, v] on the emulator's
// matrix product: the stored operands when both are f32 (or bf16 with a
// native bf16 product), else f32 copies (at most kFusedExactLogits values).
absl::StatusOr<Literal> FusedLogits(const Literal& hidden, const Literal& lm_head, int64_t rows,
                                    int64_t h, int64_t v) {
  const PrimitiveType t = hidden.shape().element_type();
  const bool direct = t == lm_head.shape().element_type() &&
                      (t == PrimitiveType::kF32 ||
                       (t == PrimitiveType::kBF16 && runtime::GemmNativeBf16()));
  std::vector<float> h32, w32;
  runtime::GemmOperand a{hidden.raw(), runtime::GemmType::kF32};
  runtime::GemmOperand b{lm_head.raw(), runtime::GemmType::kF32};
  if (direct && t == PrimitiveType::kBF16) {
    a.type = b.type = runtime::GemmType::kBf16;
  } else if (!direct) {
    h32.resize(rows * h);
    w32.resize(h * v);
    for (int64_t r = 0; r < rows; ++r) LoadRow(hidden, r, h, h32.data() + r * h);
    for (int64_t k = 0; k < h; ++k) LoadRow(lm_head, k, v, w32.data() + k * v);
    a.data = h32.data();
    b.data = w32.data();
  }
  Literal z(Shape(PrimitiveType::kF32, {rows, v}));
  RETURN_IF_ERROR(runtime::Gemm(1, rows, h, v, a, b, z.data<float>(), omp_get_max_threads()));
  return z;
}

// The estimate above, for rows too large to form.
RowStats FusedRowEstimates(const Literal& hidden, const Literal& lm_head, const Literal& ids,
                           int64_t rows, int64_t h, int64_t v, const RandomInputOptions& o) {
  RowStats s;
  s.lse.resize(rows);
  s.logp.resize(rows);
  s.entropy.resize(rows);
  const double lse_scale = o.post_lse ? 1.0 : 1.0 / o.temperature;
  const double entropy_scale = 1.0 / o.temperature;
  const double log_v = std::log(static_cast<double>(v));
#pragma omp parallel for schedule(static) if (rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t y = std::clamp<int64_t>(ids.GetAsInt64(r), 0, v - 1);
    double zy = 0, norm2 = 0;
    for (int64_t k = 0; k < h; ++k) {
      const double hk = hidden.GetAsDouble(r * h + k);
      zy += hk * lm_head.GetAsDouble(k * v + y);
      norm2 += hk * hk;
    }
    const double var = norm2 / static_cast<double>(h);  // of the row's logits
    s.lse[r] = log_v + 0.5 * var * lse_scale * lse_scale;
    s.logp[r] = zy * lse_scale - s.lse[r];
    if (o.post_lse) s.logp[r] /= o.temperature;
    s.entropy[r] = log_v - 0.5 * var * entropy_scale * entropy_scale;
  }
  return s;
}

// An array literal in host memory from runtime/cpu's allocator, not
// zero-filled (every element is written next).
absl::StatusOr<Literal> UninitialisedArray(const Shape& shape, const std::string& name) {
  const int64_t bytes = shape.byte_size();
  void* data = runtime::HostAlloc(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "random inputs: host memory exhausted allocating ", bytes, " bytes for ", name));
  }
  return Literal::AdoptArray(shape, data, &runtime::HostFree);
}

bool IsDerived(const std::string& name) {
  return name == "old_logp" || name == "ref_logp" || name == "sampler_logp" ||
         name == "lse" || name == "logp" || name == "entropy" ||
         name == "total_valid_tokens" || name == "total_nonempty_rows";
}

}  // namespace

absl::StatusOr<std::vector<Literal>> MakeRandomInputs(
    const hlo::HloComputation& entry, const RandomInputOptions& o) {
  if (!(o.temperature > 0)) {
    return absl::InvalidArgumentError("random inputs: temperature must be > 0");
  }
  const int64_t n = entry.num_parameters();
  std::vector<Literal> args(n);
  std::map<std::string, int64_t> by_name;
  for (int64_t i = 0; i < n; ++i) by_name[entry.parameter(i)->name()] = i;
  auto find = [&](const std::string& name) -> const Literal* {
    auto it = by_name.find(name);
    if (it == by_name.end()) return nullptr;
    const Literal& l = args[it->second];
    return l.shape().IsArray() ? &l : nullptr;
  };
  auto param_shape = [&](const std::string& name) -> const Shape* {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : &entry.parameter(it->second)->shape();
  };

  // Vocabulary size for chosen_ids.
  int64_t vocab = o.vocab.value_or(8);
  if (const Shape* s = param_shape("logits"); s && s->IsArray() && s->rank() >= 1) {
    vocab = s->dimensions().back();
  } else if (const Shape* s = param_shape("lm_head"); s && s->IsArray() && s->rank() == 2) {
    vocab = s->dimensions(1);
  }
  vocab = std::max<int64_t>(vocab, 1);

  // Row statistics of the logits, computed once for every derived input.
  std::optional<RowStats> row_stats;
  // The logits rows' lse, computed while they are generated when a derived
  // input will need it (not with an entropy input: that path reads the
  // rows again anyway).
  std::vector<double> logits_lse;
  bool wants_lse = by_name.count("entropy") == 0;
  if (wants_lse) {
    wants_lse = false;
    for (const auto& [name, index] : by_name) wants_lse = wants_lse || IsDerived(name);
  }
  // Pass 1: independent parameters. Pass 2: values derived from them.
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t i = 0; i < n; ++i) {
      const hlo::HloInstruction* p = entry.parameter(i);
      const std::string& name = p->name();
      if (IsDerived(name) != (pass == 1)) continue;
      const uint64_t stream = StreamSeed(o, name);
      const Shape& shape = p->shape();
      const bool is_array = shape.IsArray();
      const bool is_float = is_array && hlo::IsFloatingPoint(shape.element_type());
      const bool normal = is_float && (name == "logits" || name == "hidden" ||
                                       name == "advantages" ||
                                       (name == "lm_head" && shape.rank() == 2));
      if (normal) {
        // GiB-sized: uninitialised (no zero-fill pass), first touched by
        // the threads that fill it.
        ASSIGN_OR_RETURN(args[i], UninitialisedArray(shape, name));
        RowLseRequest lse;
        if (name == "logits" && wants_lse && shape.rank() == 3) {
          lse.row_length = shape.dimensions(2);
          lse.scale = static_cast<float>(o.post_lse ? 1.0 : 1.0 / o.temperature);
          lse.lse = &logits_lse;
        }
        FillNormal(args[i], stream,
                   name == "lm_head"
                       ? 1.0 / std::sqrt(std::max<int64_t>(shape.dimensions(0), 1))
                       : 1.0,
                   lse.lse != nullptr ? &lse : nullptr);
        continue;
      }
      Literal lit(p->shape());
      if (!is_array) {
        FillGeneric(lit, stream);
      } else if (name == "chosen_ids" && !is_float) {
        FillChunked(lit.num_elements(), stream,
                    [&](int64_t j, Rng& rng) { lit.SetFromInt64(j, rng.Below(vocab)); });
      } else if (name == "completion_mask") {
        FillChunked(lit.num_elements(), stream, [&](int64_t j, Rng& rng) {
          lit.SetFromInt64(j, rng.Uniform() < 0.8 ? 1 : 0);
        });
      } else if (name == "total_valid_tokens" && is_float) {
        double count = static_cast<double>(std::max<int64_t>(lit.num_elements(), 1));
        if (const Literal* mask = find("completion_mask")) {
          count = 0;
          for (int64_t j = 0; j < mask->num_elements(); ++j) {
            count += mask->GetAsDouble(j);
          }
          count = std::max(count, 1.0);
        }
        for (int64_t j = 0; j < lit.num_elements(); ++j) lit.SetFromDouble(j, count);
      } else if (name == "total_nonempty_rows" && is_float) {
        // Rows [B, ...] of the mask with at least one token.
        double rows = 1;
        if (const Literal* mask = find("completion_mask"); mask && mask->shape().rank() >= 1) {
          const int64_t b = mask->shape().dimensions(0);
          const int64_t per_row = mask->num_elements() / std::max<int64_t>(b, 1);
          rows = 0;
          for (int64_t r = 0; r < b; ++r) {
            bool any = false;
            for (int64_t j = 0; j < per_row && !any; ++j) {
              any = mask->GetAsDouble(r * per_row + j) != 0;
            }
            rows += any ? 1 : 0;
          }
          rows = std::max(rows, 1.0);
        }
        for (int64_t j = 0; j < lit.num_elements(); ++j) lit.SetFromDouble(j, rows);
      } else if (is_float && IsDerived(name)) {
        const Literal* logits = find("logits");
        const Literal* ids = find("chosen_ids");
        const bool consistent =
            logits && ids && logits->shape().rank() == 3 &&
            ids->num_elements() * logits->shape().dimensions(2) ==
                logits->num_elements() &&
            lit.num_elements() == ids->num_elements();
        const Literal* hidden = find("hidden");
        const Literal* lm_head = find("lm_head");
        const int64_t h_dim = hidden && hidden->shape().rank() >= 1
                                  ? hidden->shape().dimensions().back() : 0;
        const bool fused =
            !logits && hidden && lm_head && ids && h_dim > 0 && lm_head->shape().rank() == 2 &&
            lm_head->shape().dimensions(0) == h_dim && lm_head->shape().dimensions(1) >= 1 &&
            hidden->num_elements() == ids->num_elements() * h_dim &&
            lit.num_elements() == ids->num_elements();
        if (consistent && !row_stats.has_value()) {
          row_stats = ComputeRowStats(*logits, *ids, o, by_name.count("entropy") > 0, logits_lse);
        } else if (fused && !row_stats.has_value()) {
          const int64_t rows = ids->num_elements();
          const int64_t v = lm_head->shape().dimensions(1);
          const bool exact = rows <= kFusedExactLogits / v && h_dim <= kFusedExactLogits / v &&
                             rows * v <= kFusedExactMacs / h_dim;
          if (exact) {
            ASSIGN_OR_RETURN(const Literal z, FusedLogits(*hidden, *lm_head, rows, h_dim, v));
            row_stats = ComputeRowStats(z, *ids, o, true, {});
          } else {
            row_stats = FusedRowEstimates(*hidden, *lm_head, *ids, rows, h_dim, v, o);
          }
        }
        if (consistent || fused) {
          const RowStats& stats = *row_stats;
          const bool noisy =
              name == "old_logp" || name == "ref_logp" || name == "sampler_logp";
          FillChunked(lit.num_elements(), stream, [&](int64_t j, Rng& rng) {
            double v = name == "lse"       ? stats.lse[j]
                       : name == "entropy" ? stats.entropy[j]
                                           : stats.logp[j];
            if (noisy) v += 0.1 * rng.Normal();
            lit.SetFromDouble(j, v);
          });
        } else if (name == "lse" || name == "entropy") {
          FillChunked(lit.num_elements(), stream, [&](int64_t j, Rng& rng) {
            lit.SetFromDouble(j, std::log(static_cast<double>(vocab)) + rng.Uniform());
          });
        } else {
          FillChunked(lit.num_elements(), stream, [&](int64_t j, Rng& rng) {
            lit.SetFromDouble(j, -0.5 - 4.5 * rng.Uniform());
          });
        }
      } else {
        FillGeneric(lit, stream);
      }
      args[i] = std::move(lit);
    }
  }
  return args;
}

}  // namespace tpuoff::tools

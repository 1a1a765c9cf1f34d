#include "tools/io/output_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "hlo/ir/float16.h"
#include "hlo/ir/status_macros.h"
#include "tools/io/file_names.h"
#include "tools/io/json_text.h"
#include "tools/io/staged_output.h"
#include "tools/io/npy.h"

namespace tpuoff::tools {
namespace {

// numpy's name for the dtype a literal is written as.
std::string NpyDtypeNameFor(hlo::PrimitiveType t, const NpyWriteOptions& o) {
  switch (t) {
    case hlo::PrimitiveType::kPred:
      return "bool";
    case hlo::PrimitiveType::kBF16:
      return o.bf16_as_float32 ? "float32" : "bfloat16";
    case hlo::PrimitiveType::kF16:
      return "float16";
    case hlo::PrimitiveType::kF32:
      return "float32";
    case hlo::PrimitiveType::kF64:
      return "float64";
    default:
      return absl::StrCat(hlo::IsSignedInteger(t) ? "int" : "uint",
                          8 * hlo::ByteWidth(t));
  }
}

}  // namespace

std::vector<std::string> OutputNames(const hlo::HloModule& module,
                                     int64_t num_outputs) {
  std::vector<std::string> names = module.OutputNames();
  if (static_cast<int64_t>(names.size()) != num_outputs) {
    names.clear();
    for (int64_t i = 0; i < num_outputs; ++i) {
      names.push_back(absl::StrCat("output_", i));
    }
  }
  return UniqueFileStems(names, {"manifest"});
}

namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;
constexpr int64_t kChecksumChunkBytes = int64_t{1} << 20;

// FNV-1a over the chunk's 8-byte little-endian words (a short tail is
// zero-padded), seeded with the chunk's length.
uint64_t HashChunk(const uint8_t* p, int64_t n) {
  uint64_t h = (kFnvOffset ^ static_cast<uint64_t>(n)) * kFnvPrime;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kFnvPrime;
  }
  if (i < n) {
    uint64_t w = 0;
    std::memcpy(&w, p + i, static_cast<size_t>(n - i));
    h = (h ^ w) * kFnvPrime;
  }
  return h;
}

// Sums of n values at(0..n-1) into c: eight independent accumulators (one
// add chain would be bound by the add latency); NaNs are counted and left
// out of the sums.
template <typename At>
void SumValues(int64_t n, At at, Checksum* c) {
  constexpr int kLanes = 8;
  double sum[kLanes] = {}, abs_sum[kLanes] = {};
  int64_t nans[kLanes] = {}, pos_infs[kLanes] = {}, neg_infs[kLanes] = {};
  auto add = [&](int lane, double x) {
    const bool nan = x != x;
    const bool inf = std::fabs(x) == std::numeric_limits<double>::infinity();
    const bool finite = !nan && !inf;
    nans[lane] += nan;
    pos_infs[lane] += inf && x > 0;
    neg_infs[lane] += inf && x < 0;
    sum[lane] += finite ? x : 0.0;
    abs_sum[lane] += finite ? std::fabs(x) : 0.0;
  };
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) add(l, at(i + l));
  }
  for (; i < n; ++i) add(0, at(i));
  for (int l = 0; l < kLanes; ++l) {
    c->sum += sum[l];
    c->abs_sum += abs_sum[l];
    c->nan_count += nans[l];
    c->pos_inf_count += pos_infs[l];
    c->neg_inf_count += neg_infs[l];
  }
}

// SumValues for f32 (or bf16 widened to f32) values that turn out to be all
// finite, a vector of eight at a time: the same eight lanes, each adding the
// same elements in the same order, so the sums are bit-identical to
// SumValues'. Returns false (and adds nothing) when a value is NaN or
// infinite; SumValues then counts them.
template <bool kBf16>
bool SumFiniteValues(const void* data, int64_t n, Checksum* c) {
  // Lanes 0-3 and 4-7 as two 4-wide double vectors (one register each with
  // AVX2; an 8-wide one was split and spilled), |d| by clearing the sign bit.
  typedef double D4 __attribute__((vector_size(32)));
  typedef uint64_t Q4 __attribute__((vector_size(32)));
  typedef float F4 __attribute__((vector_size(16)));
  typedef uint32_t U4 __attribute__((vector_size(16)));
  typedef uint16_t H4 __attribute__((vector_size(8)));
  auto load = [data](int64_t i) {
    U4 w;
    if constexpr (kBf16) {
      H4 h;
      std::memcpy(&h, static_cast<const uint16_t*>(data) + i, sizeof(h));
      w = __builtin_convertvector(h, U4) << 16;
    } else {
      std::memcpy(&w, static_cast<const uint32_t*>(data) + i, sizeof(w));
    }
    return w;
  };
  constexpr uint64_t kNoSign = ~(uint64_t{1} << 63);
  auto abs = [](D4 d) { return (D4)((Q4)d & kNoSign); };
  D4 sum_lo = {}, sum_hi = {}, abs_lo = {}, abs_hi = {};
  U4 special = {};  // exponent all ones in some lane
  const int64_t whole = n / 8 * 8;
  for (int64_t i = 0; i < whole; i += 8) {
    const U4 lo = load(i), hi = load(i + 4);
    special |= ((lo & 0x7f800000u) == 0x7f800000u) | ((hi & 0x7f800000u) == 0x7f800000u);
    const D4 dlo = __builtin_convertvector((F4)lo, D4);
    const D4 dhi = __builtin_convertvector((F4)hi, D4);
    sum_lo += dlo;
    sum_hi += dhi;
    abs_lo += abs(dlo);
    abs_hi += abs(dhi);
  }
  double sum[8], abs_sum[8];
  for (int l = 0; l < 4; ++l) {
    sum[l] = sum_lo[l];
    sum[l + 4] = sum_hi[l];
    abs_sum[l] = abs_lo[l];
    abs_sum[l + 4] = abs_hi[l];
  }
  for (int l = 0; l < 4; ++l) {
    if (special[l]) return false;
  }
  double tail_sum = sum[0], tail_abs = abs_sum[0];
  for (int64_t i = whole; i < n; ++i) {
    float f;
    if constexpr (kBf16) {
      f = hlo::Bf16ToF32(static_cast<const uint16_t*>(data)[i]);
    } else {
      f = static_cast<const float*>(data)[i];
    }
    if (!std::isfinite(f)) return false;
    tail_sum += f;
    tail_abs += std::fabs(f);
  }
  sum[0] = tail_sum;
  abs_sum[0] = tail_abs;
  for (int l = 0; l < 8; ++l) {
    c->sum += sum[l];
    c->abs_sum += abs_sum[l];
  }
  return true;
}

// Sums of elements [first, first + n) of an array literal (f32 and bf16 read
// directly, other types through GetAsDouble).
void SumElements(const hlo::Literal& lit, int64_t first, int64_t n, Checksum* c) {
  switch (lit.shape().element_type()) {
    case hlo::PrimitiveType::kF32: {
      const float* v = lit.data<float>() + first;
      if (SumFiniteValues<false>(v, n, c)) return;
      SumValues(n, [v](int64_t i) { return double{v[i]}; }, c);
      return;
    }
    case hlo::PrimitiveType::kBF16: {
      const uint16_t* v = lit.data<uint16_t>() + first;
      if (SumFiniteValues<true>(v, n, c)) return;
      SumValues(n, [v](int64_t i) { return double{hlo::Bf16ToF32(v[i])}; }, c);
      return;
    }
    default:
      SumValues(n, [&lit, first](int64_t i) { return lit.GetAsDouble(first + i); }, c);
  }
}

}  // namespace

Checksum ComputeChecksum(const hlo::Literal& literal) {
  // Fixed 1 MiB chunks, hashed and summed in parallel and combined in
  // order: the result does not depend on the number of threads.
  const uint8_t* raw = literal.raw();
  const int64_t size = literal.raw_size();
  const int64_t chunks = std::max<int64_t>(1, (size + kChecksumChunkBytes - 1) /
                                                  kChecksumChunkBytes);
  const bool array = literal.shape().IsArray();
  const int64_t width = array ? hlo::ByteWidth(literal.shape().element_type()) : 1;
  std::vector<Checksum> part(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChecksumChunkBytes;
    const int64_t bytes = std::min(size - begin, kChecksumChunkBytes);
    part[k].hash = HashChunk(raw + begin, std::max<int64_t>(bytes, 0));
    if (array && width > 0 && bytes > 0) {
      SumElements(literal, begin / width, bytes / width, &part[k]);
    }
  }
  Checksum c;
  c.hash = kFnvOffset;
  for (const Checksum& p : part) {
    c.hash = (c.hash ^ p.hash) * kFnvPrime;
    c.sum += p.sum;
    c.abs_sum += p.abs_sum;
    c.nan_count += p.nan_count;
    c.pos_inf_count += p.pos_inf_count;
    c.neg_inf_count += p.neg_inf_count;
  }
  return c;
}

std::string FormatChecksum(const Checksum& c) {
  // Finite sums overflowing double could still meet as inf - inf: print any
  // NaN as "nan", never printf's "-nan".
  auto number = [](double v) {
    return std::isnan(v) ? std::string("nan") : absl::StrFormat("%.9g", v);
  };
  std::string s = absl::StrFormat("sum=%s abs_sum=%s hash=%016x", number(c.sum),
                                  number(c.abs_sum), c.hash);
  if (c.nan_count > 0) absl::StrAppend(&s, " nan=", c.nan_count);
  if (c.pos_inf_count > 0) absl::StrAppend(&s, " +inf=", c.pos_inf_count);
  if (c.neg_inf_count > 0) absl::StrAppend(&s, " -inf=", c.neg_inf_count);
  return s;
}

absl::Status WriteOutputs(const std::string& dir, absl::Span<const NamedOutput> outputs,
                          const NpyWriteOptions& npy, const StagedDirectoryOptions& options) {
  ASSIGN_OR_RETURN(StagedDirectory staged, StageOutputs(dir, outputs, npy, options));
  return staged.Commit();
}

absl::StatusOr<StagedDirectory> StageOutputs(const std::string& dir,
                                             absl::Span<const NamedOutput> outputs,
                                             const NpyWriteOptions& npy,
                                             const StagedDirectoryOptions& options) {
  ASSIGN_OR_RETURN(StagedDirectory staged, StagedDirectory::Create(dir, options));
  std::vector<nlohmann::ordered_json> entries;
  for (const NamedOutput& out : outputs) {
    const hlo::Shape& shape = out.literal->shape();
    ASSIGN_OR_RETURN(std::string bytes, LiteralToNpy(*out.literal, npy));
    const std::string file = absl::StrCat(out.name, ".npy");
    RETURN_IF_ERROR(staged.WriteFile(file, bytes));
    nlohmann::ordered_json entry = {
        {"name", out.name},
        {"file", file},
        {"shape", shape.dimensions()},
        {"dtype", NpyDtypeNameFor(shape.element_type(), npy)},
        {"hlo_type", hlo::PrimitiveTypeName(shape.element_type())}};
    if (out.device >= 0) entry["device"] = out.device;
    entries.push_back(std::move(entry));
  }
  // One output per line.
  const std::string manifest =
      JsonRecords(nlohmann::ordered_json::object(), "outputs", entries);
  RETURN_IF_ERROR(staged.WriteFile("manifest.json", manifest));
  return staged;
}

}  // namespace tpuoff::tools

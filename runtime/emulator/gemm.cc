#include "runtime/emulator/gemm.h"

#include <dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/cpu/parallel.h"
#include "runtime/emulator/onednn_threads.h"

namespace tpuoff::runtime {
namespace {

using dnnl::memory;

// The grid of C blocks: rows in blocks of kRowBlock; columns split too when
// there are fewer than kMinTasks row blocks, in multiples of kColQuantum.
// A function of the shape only.
constexpr int64_t kRowBlock = 256;
constexpr int64_t kMinTasks = 4;
constexpr int64_t kColQuantum = 128;

memory::data_type DnnlType(GemmType t) {
  return t == GemmType::kBf16 ? memory::data_type::bf16 : memory::data_type::f32;
}

int64_t ElementBytes(GemmType t) { return t == GemmType::kBf16 ? 2 : 4; }

// One block product's primitive: dims and strides of A, B and C and the
// operand type.
struct Key {
  int64_t rows, k, cols;
  int64_t as0, as1, bs0, bs1, cs0;
  GemmType type;
  bool operator==(const Key& o) const {
    return std::tie(rows, k, cols, as0, as1, bs0, bs1, cs0, type) ==
           std::tie(o.rows, o.k, o.cols, o.as0, o.as1, o.bs0, o.bs1, o.cs0, o.type);
  }
  template <typename H>
  friend H AbslHashValue(H h, const Key& x) {
    return H::combine(std::move(h), x.rows, x.k, x.cols, x.as0, x.as1, x.bs0, x.bs1, x.cs0,
                      static_cast<int>(x.type));
  }
};

struct Prepared {
  dnnl::matmul primitive;
  memory a, b, c;  // data handles set per call
};

// Engine, stream and primitives of one thread (oneDNN primitives may run
// concurrently, but per-thread objects keep their scratchpads apart).
struct ThreadState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  absl::flat_hash_map<Key, Prepared> cache;
};

ThreadState& State() {
  thread_local ThreadState s;
  return s;
}

constexpr size_t kMaxCached = 256;

dnnl::matmul::primitive_desc MakeDesc(const Key& key, const dnnl::engine& engine) {
  const memory::data_type t = DnnlType(key.type);
  const memory::desc a({key.rows, key.k}, t, {key.as0, key.as1});
  const memory::desc b({key.k, key.cols}, t, {key.bs0, key.bs1});
  const memory::desc c({key.rows, key.cols}, memory::data_type::f32, {key.cs0, 1});
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), engine);
}

Prepared& Lookup(ThreadState& s, const Key& key) {
  auto it = s.cache.find(key);
  if (it != s.cache.end()) return it->second;
  if (s.cache.size() >= kMaxCached) s.cache.clear();
  const dnnl::matmul::primitive_desc pd = MakeDesc(key, s.engine);
  Prepared p{dnnl::matmul(pd), memory(pd.src_desc(), s.engine, DNNL_MEMORY_NONE),
             memory(pd.weights_desc(), s.engine, DNNL_MEMORY_NONE),
             memory(pd.dst_desc(), s.engine, DNNL_MEMORY_NONE)};
  return s.cache.emplace(key, std::move(p)).first->second;
}

// Every block product runs single-threaded (the grid is the parallelism).
using OneThread = OneDnnOnThisThread;

bool ProbeNativeBf16() {
  // Without avx512_bf16 oneDNN's bf16 kernels emulate the dot products on
  // avx512_core: 42.9 GFLOP/s against 109.7 for f32 on a Cascade Lake
  // (`tpuoff bench`, the fused kernel), so bf16 is converted there too.
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (isa != dnnl::cpu_isa::avx512_core_bf16 && isa != dnnl::cpu_isa::avx512_core_amx) {
    return false;
  }
  try {
    OneThread one;
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    const Key key{64, 64, 64, 64, 1, 64, 1, 64, GemmType::kBf16};
    return std::string(MakeDesc(key, engine).impl_info_str()).rfind("ref", 0) != 0;
  } catch (const dnnl::error&) {
    return false;  // no bf16 matmul on this CPU at all
  }
}

const char* IsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse4.1";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace

bool GemmNativeBf16() {
  static const bool native = ProbeNativeBf16();
  return native;
}

const char* GemmDescription() {
  static const std::string text = absl::StrCat(
      "oneDNN ", dnnl::version()->major, ".", dnnl::version()->minor, " matmul (",
      IsaName(dnnl::get_effective_cpu_isa()), "); bf16 x bf16 ",
      GemmNativeBf16() ? "native" : "converted to f32 (no avx512_bf16 matmul on this CPU)");
  return text.c_str();
}

bool GemmWorthIt(int64_t batch, int64_t m, int64_t k, int64_t n) {
  // Below ~32^3 multiply-adds per matrix the per-call cost (primitive
  // lookup, memory handles) is comparable to the product itself.
  return m * k * n >= 32 * 32 * 32 && batch * m * k * n >= 64 * 64 * 64;
}

absl::Status Gemm(int64_t batch, int64_t m, int64_t k, int64_t n, const GemmOperand& a,
                  const GemmOperand& b, float* c, int num_threads) {
  if (a.type != b.type) {
    return absl::InternalError("gemm: operands of different types");
  }
  if (batch == 0 || m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {
    std::fill(c, c + batch * m * n, 0.0f);
    return absl::OkStatus();
  }
  const GemmType type = a.type;
  const int64_t width = ElementBytes(type);
  const int64_t row_blocks = (m + kRowBlock - 1) / kRowBlock;
  const int64_t per_col = batch * row_blocks;
  int64_t col_block = n;
  if (per_col < kMinTasks) {
    const int64_t splits = (kMinTasks + per_col - 1) / per_col;
    col_block = std::max<int64_t>(kColQuantum,
                                  ((n + splits - 1) / splits + kColQuantum - 1) / kColQuantum *
                                      kColQuantum);
    col_block = std::min(col_block, n);
  }
  const int64_t col_blocks = (n + col_block - 1) / col_block;
  const int64_t tasks = per_col * col_blocks;
  // Strides of A [m, k] and B [k, n] as stored.
  const int64_t as0 = a.col_major ? 1 : k, as1 = a.col_major ? m : 1;
  const int64_t bs0 = b.col_major ? 1 : n, bs1 = b.col_major ? k : 1;
  std::atomic<bool> failed{false};
  std::string error;
  std::mutex error_mu;
  auto run = [&](int64_t t) {
    const int64_t bi = t / (row_blocks * col_blocks);
    const int64_t r0 = (t / col_blocks) % row_blocks * kRowBlock;
    const int64_t j0 = t % col_blocks * col_block;
    const int64_t rows = std::min(kRowBlock, m - r0);
    const int64_t cols = std::min(col_block, n - j0);
    const uint8_t* ap = static_cast<const uint8_t*>(a.data) +
                        (bi * m * k + (a.col_major ? r0 : r0 * k)) * width;
    const uint8_t* bp = static_cast<const uint8_t*>(b.data) +
                        (bi * k * n + (b.col_major ? j0 * k : j0)) * width;
    float* cp = c + (bi * m + r0) * n + j0;
    try {
      ThreadState& s = State();
      Prepared& p = Lookup(s, {rows, k, cols, as0, as1, bs0, bs1, n, type});
      p.a.set_data_handle(const_cast<uint8_t*>(ap), s.stream);
      p.b.set_data_handle(const_cast<uint8_t*>(bp), s.stream);
      p.c.set_data_handle(cp, s.stream);
      p.primitive.execute(s.stream,
                          {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}});
      s.stream.wait();
    } catch (const dnnl::error& e) {
      std::lock_guard<std::mutex> l(error_mu);
      if (!failed.exchange(true)) error = e.what();
    }
  };
  // On the emulator's pool (no OpenMP team busy-waiting between products).
  ParallelFor(std::max(1, num_threads), tasks, [&](int64_t begin, int64_t end) {
    OneThread one;
    for (int64_t t = begin; t < end && !failed.load(std::memory_order_relaxed); ++t) run(t);
  });
  if (failed.load()) {
    return absl::InternalError(absl::StrCat("gemm: oneDNN matmul failed: ", error));
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::runtime

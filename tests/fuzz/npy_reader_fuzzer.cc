// libFuzzer target for the .npy reader (tools/io/npy.h): any bytes must
// parse or fail cleanly, from memory (ParseNpy) and from a file
// (ReadNpyAsLiteral, which checks the header against the file size before
// reading and converts chunk by chunk). Oracles: both paths agree on
// whether the file is valid; a valid array converts into a literal of its
// own shape (f32 for float data, s64 for integers, pred for bool), and
// writing that literal back to .npy and reading it again gives the same
// literal.
// Seeds: tests/fuzz/corpus_npy_reader (arrays of every supported dtype).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "hlo/ir/literal.h"
#include "hlo/ir/shape.h"
#include "tools/io/npy.h"

namespace {

using tpuoff::hlo::PrimitiveType;
using tpuoff::tools::NpyDtype;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "npy_reader_fuzzer: %s\n", what.c_str());
  std::abort();
}

PrimitiveType TypeFor(NpyDtype d) {
  switch (d) {
    case NpyDtype::kBool: return PrimitiveType::kPred;
    case NpyDtype::kFloat32:
    case NpyDtype::kFloat64: return PrimitiveType::kF32;
    default: return PrimitiveType::kS64;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto parsed = tpuoff::tools::ParseNpy(bytes, "fuzz.npy");

  // The same bytes as a file: a memfd, reached through /proc like a path.
  const int fd = memfd_create("fuzz.npy", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (size > 0 && write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  if (!parsed.ok()) {
    // Whatever shape is asked for, the file reader must refuse it too.
    auto lit = tpuoff::tools::ReadNpyAsLiteral(
        path, tpuoff::hlo::Shape(PrimitiveType::kF32, {2}));
    close(fd);
    if (lit.ok()) Fail("ReadNpyAsLiteral accepted bytes ParseNpy rejects");
    return 0;
  }
  const tpuoff::hlo::Shape shape(TypeFor(parsed->dtype()), parsed->shape());
  auto from_memory = tpuoff::tools::NpyToLiteral(*parsed, shape, "fuzz.npy");
  auto from_file = tpuoff::tools::ReadNpyAsLiteral(path, shape);
  close(fd);
  if (from_memory.ok() != from_file.ok()) {
    Fail(absl::StrCat("memory and file readers disagree: ", from_memory.status().ToString(),
                      " vs ", from_file.status().ToString()));
  }
  if (!from_memory.ok()) return 0;  // e.g. a bool array holding 2
  if (!(*from_memory == *from_file)) Fail("memory and file readers read different values");
  auto written = tpuoff::tools::LiteralToNpy(*from_memory);
  if (!written.ok()) Fail(absl::StrCat("LiteralToNpy failed: ", written.status().ToString()));
  auto again = tpuoff::tools::ParseNpy(*written, "again.npy");
  if (!again.ok()) Fail(absl::StrCat("written .npy does not parse: ", again.status().ToString()));
  auto back = tpuoff::tools::NpyToLiteral(*again, shape, "again.npy");
  if (!back.ok() || !(*back == *from_memory)) Fail("write -> read changed the array");
  return 0;
}

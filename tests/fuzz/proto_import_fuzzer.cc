// libFuzzer target for HloModuleProto import (binary, and JSON on the same
// bytes). Oracle: import never crashes; a module that imports and verifies
// must export, re-import and export again to the same bytes.
// Seeds: tests/fuzz/corpus_proto (exports of the builder test modules).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/stubs/logging.h"
#include "hlo/proto/proto_io.h"
#include "hlo/ir/verifier.h"

namespace {

[[noreturn]] void Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "proto_import_fuzzer: %s: %s\n", what, status.ToString().c_str());
  std::abort();
}

void CheckStable(const tpuoff::hlo::HloModule& module) {
  if (!tpuoff::hlo::VerifyModule(module).ok()) return;
  absl::StatusOr<std::string> bytes = tpuoff::hlo::ModuleToProtoBytes(module);
  if (!bytes.ok()) Fail("a verified module failed to export", bytes.status());
  auto again = tpuoff::hlo::ModuleFromProtoBytes(*bytes);
  if (!again.ok()) Fail("an exported module failed to import", again.status());
  absl::StatusOr<std::string> bytes2 = tpuoff::hlo::ModuleToProtoBytes(**again);
  if (!bytes2.ok()) Fail("a re-imported module failed to export", bytes2.status());
  if (*bytes != *bytes2) Fail("export -> import -> export changed the bytes", absl::OkStatus());
  if (!tpuoff::hlo::ModuleToProtoJson(module).ok()) Fail("JSON export failed", absl::OkStatus());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // protobuf logs every invalid-UTF-8 string it rejects; the rejection is
  // what we test, the log is noise.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  auto module = tpuoff::hlo::ModuleFromProtoBytes(input);
  if (module.ok()) CheckStable(**module);
  if (size > 0 && data[0] == '{') {
    auto from_json = tpuoff::hlo::ModuleFromProtoJson(input);
    if (from_json.ok()) CheckStable(**from_json);
  }
  return 0;
}

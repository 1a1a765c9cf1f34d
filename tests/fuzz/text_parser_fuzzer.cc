// libFuzzer target for the HLO text parser: any input must parse or fail
// cleanly; a module that parses and verifies must print to text that parses,
// verifies and prints identically (the printer/parser fixed point).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "hlo/text/text_parser.h"
#include "hlo/text/text_printer.h"
#include "hlo/ir/verifier.h"

namespace {

void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "text_parser_fuzzer: %s\n%s\n", what, detail.c_str());
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpuoff::hlo;
  if (size > (1 << 16)) return 0;  // larger inputs only slow the search down
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto module = ParseHloText(text, "fuzz.hlo");
  if (!module.ok()) return 0;
  if (!VerifyModule(**module).ok()) {
    // Unverified modules must still print without crashing.
    (void)PrintModule(**module);
    return 0;
  }
  const std::string printed = PrintModule(**module);
  auto reparsed = ParseHloText(printed, "printed.hlo");
  if (!reparsed.ok()) Fail("printed module does not parse", reparsed.status().ToString() + "\n" + printed);
  const absl::Status verified = VerifyModule(**reparsed);
  if (!verified.ok()) Fail("printed module does not verify", verified.ToString() + "\n" + printed);
  const std::string reprinted = PrintModule(**reparsed);
  if (reprinted != printed) Fail("printing is not a fixed point", printed + "\n----\n" + reprinted);
  return 0;
}

// tpuoff.kernel_hlo: the CLI's kernel and sharding flags, parsed by the CLI's
// own FlagSet, so every option `tpuoff dump --kernel=...` has is a keyword
// with the same checks and messages.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "python/src/api.h"
#include "python/src/status_error.h"
#include "tools/cli/flags.h"
#include "tools/cli/kernel_flags.h"
#include "tools/cli/shard_flags.h"
#include "tools/io/module_io.h"

namespace nb = nanobind;

namespace tpuoff::python {
namespace {

constexpr char kCommand[] = "tpuoff.kernel_hlo";

struct KernelArgs {
  tools::KernelFlags kernel;
  tools::ShardFlags shard;
};

void Register(tools::FlagSet& flags, KernelArgs* out) {
  tools::RegisterKernelFlags(flags, &out->kernel);
  tools::RegisterShardFlags(flags, &out->shard);
}

absl::StatusOr<std::unique_ptr<hlo::HloModule>> Build(const std::vector<std::string>& args) {
  KernelArgs values;
  tools::FlagSet flags(kCommand, "--kernel=NAME [kernel flags]", "");
  Register(flags, &values);
  if (absl::Status s = flags.Parse(args); !s.ok()) return s;
  if (!flags.WasSet("kernel")) {
    return absl::InvalidArgumentError(absl::StrCat(kCommand, ": expected kernel=NAME"));
  }
  if (absl::Status s = tools::CheckKernelFlagUsage(flags, &values.kernel); !s.ok()) return s;
  if (absl::Status s = tools::CheckShardFlagUsage(flags, values.shard, values.kernel); !s.ok()) {
    return s;
  }
  return tools::BuildShardedModule(values.kernel, values.shard);
}

}  // namespace

std::vector<std::string> KernelFlagNames() {
  KernelArgs values;
  tools::FlagSet flags(kCommand, "", "");
  Register(flags, &values);
  return flags.Names();
}

Module KernelModule(const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module;
  {
    nb::gil_scoped_release release;
    module = Build(args);
  }
  return Module{std::shared_ptr<const hlo::HloModule>(ValueOrThrow(std::move(module)))};
}

nb::object KernelHlo(const std::vector<std::string>& args, const std::string& format) {
  return Serialize(KernelModule(args), format);
}

}  // namespace tpuoff::python

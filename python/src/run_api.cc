// tpuoff.run: a module on the host emulator or a PJRT plugin with NumPy
// arrays in and out, borrowed and handed over rather than copied, the GIL
// released meanwhile. The run itself is `tpuoff run`'s: the same host-memory
// refusal (tools/io/host_budget.h), limits (runtime::RunOptions) and
// backend dispatch (tools/io/backend_run.h, RunOnBackend). A run stops on
// Ctrl-C (KeyboardInterrupt).
#include <atomic>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nanobind/stl/string.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/instruction.h"
#include "hlo/spmd/sharding_util.h"
#include "python/src/api.h"
#include "python/src/arrays.h"
#include "python/src/status_error.h"
#include "runtime/emulator/executor.h"
#include "runtime/pjrt/pjrt_backend.h"
#include "tools/cli/run_limit_flags.h"
#include "tools/io/backend_run.h"
#include "tools/io/host_budget.h"
#include "tools/io/output_writer.h"

namespace nb = nanobind;

namespace tpuoff::python {
namespace {

constexpr char kCommand[] = "tpuoff.run";

struct Parameter {
  std::string name;
  hlo::Shape shape;  // global for partitioned modules
};

std::string ExpectedText(const std::vector<Parameter>& params) {
  std::string out = "expected inputs:";
  for (const Parameter& p : params) {
    absl::StrAppend(&out, "\n  ", p.name, ": ", p.shape.ToString(), " (numpy ",
                    NumpyTypeName(p.shape.element_type()), ", shape (",
                    absl::StrJoin(p.shape.dimensions(), ", "),
                    p.shape.rank() == 1 ? ",))" : "))");
  }
  return out;
}

absl::Status InputError(const std::string& message, const std::vector<Parameter>& params) {
  return absl::InvalidArgumentError(
      absl::StrCat(kCommand, ": ", message, "; ", ExpectedText(params)));
}

// Borrows one array (keeping the Python object in `keep`).
hlo::Literal Borrow(const std::string& what, nb::handle value, const hlo::Shape& shape,
                    std::vector<InputArray>* keep) {
  InputArray array;
  if (!nb::try_cast(value, array, /*convert=*/false)) {
    const std::string type = nb::cast<std::string>(nb::str(value.type().attr("__name__")));
    if (nb::hasattr(value, "dtype") && nb::hasattr(value, "shape") &&
        nb::hasattr(value.attr("dtype"), "str")) {
      // An array NumPy holds but DLPack cannot describe: non-native byte
      // order, object, structured, void, string or datetime elements.
      ThrowIfError(absl::InvalidArgumentError(absl::StrCat(
          kCommand, ": ", what, ": a ", type, " of dtype ",
          nb::cast<std::string>(value.attr("dtype").attr("str")),
          " cannot be borrowed (non-native byte order, or not a bool, integer, float or "
          "complex type); the parameter is ",
          shape.IsArray() ? NumpyTypeName(shape.element_type()) : shape.ToString(),
          ": pass x.astype(<that dtype>)")));
    }
    ThrowIfError(absl::InvalidArgumentError(
        absl::StrCat(kCommand, ": ", what, ": expected a numpy array, got ", type)));
  }
  if (!shape.IsArray()) {
    ThrowIfError(absl::UnimplementedError(absl::StrCat(
        kCommand, ": ", what, ": parameters of shape ", shape.ToString(),
        " cannot be passed from Python")));
  }
  hlo::Literal lit = ValueOrThrow(BorrowInput(absl::StrCat(kCommand, ": ", what), array, shape));
  keep->push_back(std::move(array));
  return lit;
}

// Runs `run` on a thread of its own, the GIL released, while this thread
// looks for signals every 100 ms: a Python signal handler that raises
// (Ctrl-C: KeyboardInterrupt) sets `cancel`, which stops an emulator run at
// its devices' next step and kills a PJRT plugin's process. Returns whether that happened (the
// Python error is then set, once the run has stopped).
bool RunInterrupted(std::atomic<bool>& cancel, const std::function<void()>& run) {
  absl::Mutex mu;
  bool done = false;
  bool interrupted = false;
  nb::gil_scoped_release release;
  std::thread worker([&] {
    run();
    absl::MutexLock lock(&mu);
    done = true;
  });
  {
    absl::MutexLock lock(&mu);
    while (!mu.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(100))) {
      if (interrupted) continue;
      mu.Unlock();
      {
        nb::gil_scoped_acquire acquire;
        interrupted = PyErr_CheckSignals() != 0;
      }
      mu.Lock();
      if (interrupted) cancel.store(true, std::memory_order_relaxed);
    }
  }
  worker.join();
  return interrupted;
}

}  // namespace

nb::tuple Run(const Module& module, nb::dict inputs, const RunConfig& config) {
  const hlo::HloModule& m = *module.hlo;
  const tools::Backend backend = ValueOrThrow(tools::ParseBackend(config.backend));
  const double hbm_gib = config.hbm_gib;
  const int threads = config.threads;
  if (!(hbm_gib > 0) || hbm_gib > 1e6) {
    ThrowIfError(absl::InvalidArgumentError(
        absl::StrCat(kCommand, ": hbm_gib must be in (0, 1e6], got ", hbm_gib)));
  }
  if (threads < 0 || threads > 4096) {
    ThrowIfError(absl::InvalidArgumentError(
        absl::StrCat(kCommand, ": threads must be in [0, 4096], got ", threads)));
  }
  tools::RunLimitFlags limits;
  limits.max_loop_iterations = config.max_loop_iterations;
  limits.timeout = config.timeout;
  limits.collective_timeout = config.collective_timeout;
  if (absl::Status s = tools::CheckRunLimitFlags(limits); !s.ok()) {
    // The CLI's message, with the keyword's name for the flag's.
    std::string message(s.message());
    for (auto [flag, keyword] : {std::pair{"--max-loop-iterations", "max_loop_iterations"},
                                 std::pair{"--collective-timeout", "collective_timeout"},
                                 std::pair{"--timeout", "timeout"}}) {
      if (message.rfind(flag, 0) == 0) {
        message = absl::StrCat(keyword, message.substr(std::string(flag).size()));
        break;
      }
    }
    ThrowIfError(absl::InvalidArgumentError(absl::StrCat(kCommand, ": ", message)));
  }
  ThrowIfError(CheckPath(kCommand, "pjrt_plugin", config.pjrt_plugin));
  if (backend != tools::Backend::kPjrt && !config.pjrt_plugin.empty()) {
    ThrowIfError(absl::InvalidArgumentError(
        absl::StrCat(kCommand, ": pjrt_plugin needs backend='pjrt'")));
  }
  const bool partitioned = hlo::IsPartitionedModule(m);
  std::optional<hlo::PartitionedSignature> signature;
  if (partitioned) signature = ValueOrThrow(hlo::GetPartitionedSignature(m));
  const int64_t num_devices = std::max<int64_t>(m.num_partitions(), 1);
  // Per-device programs that are not partitioned take per-device inputs.
  const int64_t input_sets = partitioned ? 1 : num_devices;

  std::vector<Parameter> params;
  for (int64_t i = 0; i < m.entry()->num_parameters(); ++i) {
    params.push_back({m.entry()->parameter(i)->name(),
                      partitioned ? signature->global_parameters[i]
                                  : m.entry()->parameter(i)->shape()});
  }
  for (auto [key, value] : inputs) {
    const std::string name = nb::cast<std::string>(nb::str(key));
    bool known = false;
    for (const Parameter& p : params) known = known || p.name == name;
    if (!known) ThrowIfError(InputError(absl::StrCat("unknown input '", name, "'"), params));
  }

  std::vector<InputArray> keep;
  std::vector<std::vector<hlo::Literal>> args(input_sets);
  for (const Parameter& p : params) {
    if (!inputs.contains(p.name.c_str())) {
      ThrowIfError(InputError(absl::StrCat("missing input '", p.name, "'"), params));
    }
    nb::object value = inputs[p.name.c_str()];
    const bool per_device = nb::isinstance<nb::list>(value) || nb::isinstance<nb::tuple>(value);
    if (per_device) {
      if (input_sets == 1) {
        ThrowIfError(InputError(absl::StrCat("input '", p.name, "' is a list; this module ",
                                             partitioned ? "takes global arrays"
                                                         : "runs on one device",
                                             ": give one array"),
                                params));
      }
      if (static_cast<int64_t>(nb::len(value)) != input_sets) {
        ThrowIfError(InputError(absl::StrCat("input '", p.name, "' lists ", nb::len(value),
                                             " arrays for ", input_sets, " devices"),
                                params));
      }
      for (int64_t d = 0; d < input_sets; ++d) {
        args[d].push_back(Borrow(absl::StrCat("input '", p.name, "' of device ", d),
                                 value[d], p.shape, &keep));
      }
    } else {
      hlo::Literal lit = Borrow(absl::StrCat("input '", p.name, "'"), value, p.shape, &keep);
      // Shared by every device: the others view the same memory.
      for (int64_t d = 1; d < input_sets; ++d) {
        args[d].push_back(hlo::Literal::BorrowArray(lit.shape(), lit.raw()));
      }
      args[0].push_back(std::move(lit));
    }
  }

  // Nothing more is allocated before the host is known to hold it: the
  // pieces of a partitioned module's inputs, every device's buffers and the
  // outputs (the caller's arrays exist already).
  ThrowIfError(tools::CheckHostMemory(
      absl::StrCat(kCommand, " of ", m.name()),
      tools::RunHostNeed(m, signature ? &*signature : nullptr,
                         {.global_inputs = false, .device_inputs = false})));

  tools::BackendOptions options;
  options.backend = backend;
  options.pjrt_plugin = config.pjrt_plugin;
  options.emulator.num_threads = threads;
  options.emulator.hbm_capacity_bytes =
      std::max<int64_t>(1, static_cast<int64_t>(std::llround(hbm_gib * 1073741824.0)));
  options.emulator.record_allocations = false;
  tools::ApplyRunLimits(limits, &options.emulator);
  options.pjrt_timeout_seconds = limits.timeout;
  const std::vector<hlo::Shape> leaves = [&] {
    std::vector<hlo::Shape> out;
    // Depth-first leaves, as RunResult::outputs orders them.
    std::function<void(const hlo::Shape&)> walk = [&](const hlo::Shape& s) {
      if (!s.IsTuple()) {
        out.push_back(s);
        return;
      }
      for (const hlo::Shape& e : s.tuple_shapes()) walk(e);
    };
    walk(m.entry()->root()->shape());
    return out;
  }();
  const std::vector<std::string> names =
      tools::OutputNames(m, static_cast<int64_t>(leaves.size()));

  const std::vector<std::string> leaf_names = partitioned ? names : std::vector<std::string>{};
  absl::StatusOr<tools::BackendResult> result;
  // The emulator checks the flag between steps; a PJRT plugin runs in a
  // child process, killed once it is set.
  std::atomic<bool> cancel{false};
  options.emulator.cancel = &cancel;
  options.pjrt_cancel = &cancel;
  if (RunInterrupted(cancel, [&] {
        result = tools::RunOnBackend(m, signature, args, options, leaf_names);
      })) {
    // KeyboardInterrupt (or what the handler raised), with a note saying
    // where the run stopped.
    nb::python_error error;
    if (!result.ok() && nb::hasattr(error.value(), "add_note")) {
      const absl::string_view message = result.status().message();
      error.value().attr("add_note")(nb::str(
          absl::StrCat(kCommand, " stopped: ", message).c_str()));
    }
    error.restore();
    throw nb::python_error();
  }
  tools::BackendResult ran = ValueOrThrow(std::move(result));
  runtime::RunResult& r = ran.run;

  nb::list outputs;
  const int64_t per_set = static_cast<int64_t>(names.size());
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    const int64_t set = static_cast<int64_t>(i) / per_set;
    const std::string& base = names[i % per_set];
    const std::string name = input_sets == 1 ? base : absl::StrCat(base, ".device", set);
    const std::string type = NumpyTypeName(r.outputs[i].shape().element_type());
    outputs.append(nb::make_tuple(name, OutputArray(std::move(r.outputs[i])), type));
  }
  nb::list devices;
  for (const runtime::DeviceReport& dev : r.devices) {
    nb::dict d;
    d["device"] = dev.device_id;
    d["name"] = dev.name;
    d["peak_hbm_bytes"] = dev.stats.peak_bytes;
    d["hbm_capacity_bytes"] = dev.hbm_capacity_bytes;
    devices.append(d);
  }
  nb::dict stats;
  stats["devices"] = devices;
  stats["wall_seconds"] = r.wall_seconds;
  stats["backend"] = std::string(tools::BackendName(backend));
  stats["summary"] = ran.summary;
  return nb::make_tuple(outputs, stats);
}

nb::dict PjrtInfo() {
  nb::dict info;
  info["available"] = runtime::pjrt::Available();
  info["cpu_plugin"] = runtime::pjrt::DefaultCpuPluginPath();
  info["tpu_plugin"] = runtime::pjrt::DefaultTpuPluginPath();
  return info;
}

}  // namespace tpuoff::python

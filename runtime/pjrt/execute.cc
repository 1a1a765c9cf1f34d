// Execute(): compile on a plugin's client and run on its devices.
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hlo/ir/computation.h"
#include "hlo/ir/instruction.h"
#include "hlo/ir/status_macros.h"
#include "runtime/pjrt/handles.h"
#include "runtime/pjrt/isolated.h"
#include "runtime/pjrt/program.h"

namespace tpuoff::runtime::pjrt {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

PJRT_NamedValue Int64Option(const char* name, int64_t value) {
  PJRT_NamedValue v = TPUOFF_PJRT_ARGS(PJRT_NamedValue);
  v.name = name;
  v.name_size = std::strlen(name);
  v.type = PJRT_NamedValue_kInt64;
  v.int64_value = value;
  v.value_size = 1;
  return v;
}

// The result leaves' shapes of the entry (the root tuple's elements, or the
// single array). UNIMPLEMENTED for nested tuples (PJRT returns one buffer
// per top-level element).
absl::StatusOr<std::vector<hlo::Shape>> OutputShapes(const hlo::HloModule& module) {
  const hlo::Shape& root = module.entry()->root()->shape();
  if (!root.IsTuple()) return std::vector<hlo::Shape>{root};
  std::vector<hlo::Shape> out;
  for (const hlo::Shape& s : root.tuple_shapes()) {
    if (s.IsTuple()) {
      return absl::UnimplementedError(absl::StrCat(
          "module ", module.name(), ": the PJRT backend runs modules whose result is an array "
          "or a flat tuple of arrays; the root is ", root.ToString()));
    }
    out.push_back(s);
  }
  return out;
}

absl::Status CheckArguments(const hlo::HloModule& module,
                            absl::Span<const absl::Span<const hlo::Literal>> per_device) {
  const hlo::HloComputation& entry = *module.entry();
  for (size_t d = 0; d < per_device.size(); ++d) {
    absl::Span<const hlo::Literal> args = per_device[d];
    if (static_cast<int64_t>(args.size()) != entry.num_parameters()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device ", d, ": ", args.size(), " arguments for ", entry.num_parameters(),
          " parameters of ", module.name()));
    }
    for (int64_t i = 0; i < entry.num_parameters(); ++i) {
      const hlo::HloInstruction* p = entry.parameter(i);
      if (p->shape().IsTuple() || !args[i].shape().Compatible(p->shape())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device ", d, ": argument ", i, " (%", p->name(), ") is ",
            args[i].shape().ToString(), ", the parameter is ", p->shape().ToString()));
      }
    }
  }
  return absl::OkStatus();
}

// Host -> device copy of one array (synchronous: the plugin copies during
// the call).
absl::StatusOr<Owned<PJRT_Buffer>> ToDevice(const Plugin& p, PJRT_Client* client,
                                            PJRT_Device* device, const hlo::Literal& lit) {
  ASSIGN_OR_RETURN(PJRT_Buffer_Type type, BufferTypeOf(lit.shape().element_type()));
  const std::vector<int64_t>& dims = lit.shape().dimensions();
  PJRT_Client_BufferFromHostBuffer_Args args =
      TPUOFF_PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  args.client = client;
  args.data = lit.raw();
  args.type = type;
  args.dims = dims.data();
  args.num_dims = dims.size();
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  args.device = device;
  RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_Client_BufferFromHostBuffer, &args));
  Owned<PJRT_Buffer> buffer(&p, args.buffer);
  RETURN_IF_ERROR(AwaitAndDestroy(p, args.done_with_host_buffer, "host-to-device copy"));
  return buffer;
}

// Device -> host copy into a row-major literal of `shape`, after checking
// the buffer's type and dimensions against it.
absl::StatusOr<hlo::Literal> ToHost(const Plugin& p, PJRT_Buffer* buffer,
                                    const hlo::Shape& shape, const std::string& what) {
  PJRT_Buffer_ElementType_Args et = TPUOFF_PJRT_ARGS(PJRT_Buffer_ElementType_Args);
  et.buffer = buffer;
  RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_Buffer_ElementType, &et));
  PJRT_Buffer_Dimensions_Args dm = TPUOFF_PJRT_ARGS(PJRT_Buffer_Dimensions_Args);
  dm.buffer = buffer;
  RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_Buffer_Dimensions, &dm));
  ASSIGN_OR_RETURN(PJRT_Buffer_Type want, BufferTypeOf(shape.element_type()));
  std::vector<int64_t> dims(dm.dims, dm.dims + dm.num_dims);
  if (et.type != want || dims != shape.dimensions()) {
    return absl::InternalError(absl::StrCat(
        what, ": the plugin returned a buffer of type ", static_cast<int>(et.type), " [",
        absl::StrJoin(dims, ","), "], expected ", shape.ToString()));
  }
  // The buffer's layout on the device: the host copy comes in it (plugins
  // do not all honour a requested host layout), and is permuted to
  // row-major here when it is not.
  PJRT_Buffer_GetMemoryLayout_Args ml = TPUOFF_PJRT_ARGS(PJRT_Buffer_GetMemoryLayout_Args);
  ml.buffer = buffer;
  RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_Buffer_GetMemoryLayout, &ml));
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> minor_to_major(rank);
  for (int64_t i = 0; i < rank; ++i) minor_to_major[i] = rank - 1 - i;
  if (ml.layout.type == PJRT_Buffer_MemoryLayout_Type_Tiled) {
    const PJRT_Buffer_MemoryLayout_Tiled& t = ml.layout.tiled;
    if (t.num_tiles > 0 || static_cast<int64_t>(t.minor_to_major_size) != rank) {
      return absl::UnimplementedError(absl::StrCat(
          what, ": the plugin returned a tiled device layout (", t.num_tiles,
          " tiles); only dense layouts are read back"));
    }
    minor_to_major.assign(t.minor_to_major, t.minor_to_major + rank);
  } else if (ml.layout.type == PJRT_Buffer_MemoryLayout_Type_Strides) {
    return absl::UnimplementedError(
        absl::StrCat(what, ": the plugin returned a strided device layout"));
  }
  hlo::Literal lit(hlo::Shape(shape.element_type(), shape.dimensions()));
  bool row_major = true;
  for (int64_t i = 0; i < rank; ++i) row_major &= minor_to_major[i] == rank - 1 - i;
  hlo::Literal device_order = row_major ? hlo::Literal() : hlo::Literal(lit.shape());
  hlo::Literal& dst = row_major ? lit : device_order;
  PJRT_Buffer_ToHostBuffer_Args args = TPUOFF_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  args.src = buffer;
  args.dst = dst.raw();
  args.dst_size = static_cast<size_t>(dst.raw_size());
  RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_Buffer_ToHostBuffer, &args));
  RETURN_IF_ERROR(AwaitAndDestroy(p, args.event, "device-to-host copy"));
  if (!row_major) PermuteToRowMajor(device_order, minor_to_major, &lit);
  return lit;
}

}  // namespace

absl::StatusOr<ExecuteResult> Execute(const hlo::HloModule& module,
                                      const std::vector<std::vector<hlo::Literal>>& per_device,
                                      const ExecuteOptions& options) {
  std::vector<absl::Span<const hlo::Literal>> spans(per_device.begin(), per_device.end());
  return Execute(module, absl::MakeConstSpan(spans), options);
}

// Execute in this process (the plugin's crash or endless loop is ours), on
// arguments Execute checked, with `out_shapes` its outputs' leaves.
static absl::StatusOr<ExecuteResult> ExecuteInProcess(
    const hlo::HloModule& module, absl::Span<const absl::Span<const hlo::Literal>> per_device,
    const std::vector<hlo::Shape>& out_shapes, const std::string& path) {
  const int64_t n = std::max<int64_t>(module.num_partitions(), 1);
  ASSIGN_OR_RETURN(const Plugin* plugin, Plugin::Get(path));
  const Plugin& p = *plugin;

  // A client with n devices (the XLA CPU plugin's option; other plugins
  // ignore it and must have n devices of their own).
  PJRT_NamedValue count = Int64Option("cpu_device_count", n);
  PJRT_Client_Create_Args create = TPUOFF_PJRT_ARGS(PJRT_Client_Create_Args);
  create.create_options = &count;
  create.num_options = 1;
  RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_Client_Create, &create));
  Owned<PJRT_Client> client(&p, create.client);

  ExecuteResult result;
  result.plugin = p.info();
  result.num_devices = n;
  PJRT_Client_PlatformName_Args name = TPUOFF_PJRT_ARGS(PJRT_Client_PlatformName_Args);
  name.client = client.get();
  RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_Client_PlatformName, &name));
  result.platform.assign(name.platform_name, name.platform_name_size);

  PJRT_Client_AddressableDevices_Args devs =
      TPUOFF_PJRT_ARGS(PJRT_Client_AddressableDevices_Args);
  devs.client = client.get();
  RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_Client_AddressableDevices, &devs));
  if (static_cast<int64_t>(devs.num_addressable_devices) < n) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PJRT plugin ", path, " (", result.platform, ") has ", devs.num_addressable_devices,
        " addressable devices; module ", module.name(), " needs ", n));
  }
  std::vector<PJRT_Device*> devices(devs.addressable_devices, devs.addressable_devices + n);
  std::vector<int64_t> device_ids;
  for (PJRT_Device* d : devices) {
    PJRT_Device_GetDescription_Args gd = TPUOFF_PJRT_ARGS(PJRT_Device_GetDescription_Args);
    gd.device = d;
    RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_Device_GetDescription, &gd));
    PJRT_DeviceDescription_Id_Args id = TPUOFF_PJRT_ARGS(PJRT_DeviceDescription_Id_Args);
    id.device_description = gd.device_description;
    RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_DeviceDescription_Id, &id));
    device_ids.push_back(id.id);
  }

  // Compile.
  auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::string code, PjrtProgramBytes(module));
  ASSIGN_OR_RETURN(std::string copts,
                   CompileOptionsBytes({.num_partitions = n,
                                        .device_ids = n > 1 ? device_ids
                                                            : std::vector<int64_t>{}},
                                       code));
  PJRT_Program program = TPUOFF_PJRT_ARGS(PJRT_Program);
  program.code = code.data();
  program.code_size = code.size();
  program.format = "hlo";
  program.format_size = 3;
  PJRT_Client_Compile_Args compile = TPUOFF_PJRT_ARGS(PJRT_Client_Compile_Args);
  compile.client = client.get();
  compile.program = &program;
  compile.compile_options = copts.data();
  compile.compile_options_size = copts.size();
  if (absl::Status s = TPUOFF_PJRT_CALL(p, PJRT_Client_Compile, &compile); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("compiling ", module.name(), " with ", path,
                                               ": ", s.message()));
  }
  Owned<PJRT_LoadedExecutable> exe(&p, compile.executable);
  result.compile_seconds = SecondsSince(t0);

  PJRT_LoadedExecutable_GetExecutable_Args ge =
      TPUOFF_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  ge.loaded_executable = exe.get();
  RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_LoadedExecutable_GetExecutable, &ge));
  Owned<PJRT_Executable> unloaded(&p, ge.executable);
  PJRT_Executable_NumOutputs_Args no = TPUOFF_PJRT_ARGS(PJRT_Executable_NumOutputs_Args);
  no.executable = unloaded.get();
  RETURN_IF_ERROR(TPUOFF_PJRT_CALL(p, PJRT_Executable_NumOutputs, &no));
  if (no.num_outputs != out_shapes.size()) {
    return absl::InternalError(absl::StrCat("the compiled ", module.name(), " has ",
                                            no.num_outputs, " outputs, the module ",
                                            out_shapes.size()));
  }

  // Arguments to the devices.
  t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<Owned<PJRT_Buffer>>> inputs(n);
  std::vector<std::vector<PJRT_Buffer*>> input_ptrs(n);
  for (int64_t d = 0; d < n; ++d) {
    for (size_t i = 0; i < per_device[d].size(); ++i) {
      absl::StatusOr<Owned<PJRT_Buffer>> b =
          ToDevice(p, client.get(), devices[d], per_device[d][i]);
      if (!b.ok()) {
        return absl::Status(b.status().code(), absl::StrCat("device ", d, ", argument ", i,
                                                            ": ", b.status().message()));
      }
      input_ptrs[d].push_back(b->get());
      inputs[d].push_back(*std::move(b));
    }
  }
  std::vector<PJRT_Buffer* const*> arg_lists(n);
  for (int64_t d = 0; d < n; ++d) arg_lists[d] = input_ptrs[d].data();

  // Run on all devices at once (collectives need every device in the call).
  std::vector<std::vector<PJRT_Buffer*>> out_ptrs(n, std::vector<PJRT_Buffer*>(no.num_outputs));
  std::vector<PJRT_Buffer**> out_lists(n);
  for (int64_t d = 0; d < n; ++d) out_lists[d] = out_ptrs[d].data();
  std::vector<PJRT_Event*> done(n, nullptr);
  PJRT_ExecuteOptions exec_options = TPUOFF_PJRT_ARGS(PJRT_ExecuteOptions);
  PJRT_LoadedExecutable_Execute_Args run =
      TPUOFF_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  run.executable = exe.get();
  run.options = &exec_options;
  run.argument_lists = arg_lists.data();
  run.num_devices = n;
  run.num_args = module.entry()->num_parameters();
  run.output_lists = out_lists.data();
  run.device_complete_events = done.data();
  absl::Status ran = TPUOFF_PJRT_CALL(p, PJRT_LoadedExecutable_Execute, &run);
  // Own whatever the plugin returned before looking at errors.
  std::vector<std::vector<Owned<PJRT_Buffer>>> outputs(n);
  for (int64_t d = 0; d < n && ran.ok(); ++d) {
    for (PJRT_Buffer* b : out_ptrs[d]) outputs[d].emplace_back(&p, b);
  }
  for (int64_t d = 0; d < n; ++d) {
    absl::Status s = AwaitAndDestroy(p, done[d], "execution");
    if (ran.ok() && !s.ok()) {
      ran = absl::Status(s.code(), absl::StrCat("device ", d, ": ", s.message()));
    }
  }
  if (!ran.ok()) {
    return absl::Status(ran.code(), absl::StrCat("running ", module.name(), " on ", path, ": ",
                                                 ran.message()));
  }
  for (int64_t d = 0; d < n; ++d) {
    for (size_t i = 0; i < out_shapes.size(); ++i) {
      ASSIGN_OR_RETURN(hlo::Literal lit,
                       ToHost(p, outputs[d][i].get(), out_shapes[i],
                              absl::StrCat("device ", d, ", output ", i)));
      result.outputs.push_back(std::move(lit));
    }
  }
  result.execute_seconds = SecondsSince(t0);
  return result;
}

absl::StatusOr<ExecuteResult> Execute(const hlo::HloModule& module,
                                      absl::Span<const absl::Span<const hlo::Literal>> per_device,
                                      const ExecuteOptions& options) {
  const int64_t n = std::max<int64_t>(module.num_partitions(), 1);
  if (static_cast<int64_t>(per_device.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "module ", module.name(), " runs on ", n, " devices; got ", per_device.size(),
        " argument sets"));
  }
  RETURN_IF_ERROR(CheckArguments(module, per_device));
  ASSIGN_OR_RETURN(std::vector<hlo::Shape> out_shapes, OutputShapes(module));
  const std::string path =
      options.plugin_path.empty() ? DefaultCpuPluginPath() : options.plugin_path;
  // In a child process (the arguments are its copy-on-write view of ours):
  // the plugin aborting (the XLA CPU plugin on a collective that never
  // completes), never returning, or being cancelled ends the child; the
  // outputs come back through the pipe straight into their literals.
  ExecuteResult result;
  RETURN_IF_ERROR(RunIsolated(
      {.what = absl::StrCat("running ", module.name(), " with ", path),
       .timeout_seconds = options.timeout_seconds,
       .cancel = options.cancel},
      [&](ChildWriter& w) -> absl::Status {
        ASSIGN_OR_RETURN(ExecuteResult r, ExecuteInProcess(module, per_device, out_shapes, path));
        if (r.outputs.size() != static_cast<size_t>(n) * out_shapes.size()) {
          return absl::InternalError(absl::StrCat("running ", module.name(), ": ",
                                                  r.outputs.size(), " outputs"));
        }
        for (int64_t v : {r.num_devices, int64_t{r.plugin.api_major},
                          int64_t{r.plugin.api_minor}}) {
          RETURN_IF_ERROR(w.WriteU64(static_cast<uint64_t>(v)));
        }
        RETURN_IF_ERROR(w.Write(&r.compile_seconds, sizeof(double)));
        RETURN_IF_ERROR(w.Write(&r.execute_seconds, sizeof(double)));
        RETURN_IF_ERROR(w.WriteString(r.plugin.path));
        RETURN_IF_ERROR(w.WriteString(r.platform));
        for (const hlo::Literal& lit : r.outputs) {
          RETURN_IF_ERROR(w.WriteU64(static_cast<uint64_t>(lit.raw_size())));
          RETURN_IF_ERROR(w.Write(lit.raw(), lit.raw_size()));
        }
        return absl::OkStatus();
      },
      [&](ChildReader& rd) -> absl::Status {
        uint64_t v[3];
        for (uint64_t& x : v) RETURN_IF_ERROR(rd.ReadU64(&x));
        result.num_devices = static_cast<int64_t>(v[0]);
        result.plugin.api_major = static_cast<int>(v[1]);
        result.plugin.api_minor = static_cast<int>(v[2]);
        RETURN_IF_ERROR(rd.Read(&result.compile_seconds, sizeof(double)));
        RETURN_IF_ERROR(rd.Read(&result.execute_seconds, sizeof(double)));
        RETURN_IF_ERROR(rd.ReadString(&result.plugin.path, 1 << 16));
        RETURN_IF_ERROR(rd.ReadString(&result.platform, 1 << 16));
        for (int64_t d = 0; d < n; ++d) {
          for (const hlo::Shape& shape : out_shapes) {
            hlo::Literal lit(hlo::Shape(shape.element_type(), shape.dimensions()));
            uint64_t size = 0;
            RETURN_IF_ERROR(rd.ReadU64(&size));
            if (size != static_cast<uint64_t>(lit.raw_size())) {
              return absl::InternalError(absl::StrCat("running ", module.name(), ": output of ",
                                                      size, " bytes for ", shape.ToString()));
            }
            RETURN_IF_ERROR(rd.Read(lit.raw(), lit.raw_size()));
            result.outputs.push_back(std::move(lit));
          }
        }
        return absl::OkStatus();
      }));
  return result;
}

}  // namespace tpuoff::runtime::pjrt

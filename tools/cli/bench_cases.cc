#include "tools/cli/bench_cases.h"

#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hlo/spmd/sharding_util.h"
#include "hlo/ir/status_macros.h"
#include "kernels/build_kernel.h"
#include "nlohmann/json.hpp"
#include "runtime/pjrt/pjrt_backend.h"
#include "runtime/emulator/executor.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/device/sharding_io.h"
#include "tools/io/file_util.h"
#include "tools/io/json_text.h"
#include "tools/io/module_io.h"
#include "tools/io/output_writer.h"
#include "tools/io/partitioned_io.h"
#include "tools/io/random_inputs.h"

namespace tpuoff::tools {
namespace {

using hlo::Literal;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Runs `fn` warmup + reps times; times the reps (wall and CPU).
template <typename F>
absl::Status TimeIt(const BenchSettings& s, Timing* t, F&& fn) {
  for (int i = 0; i < s.warmup + s.reps; ++i) {
    const double t0 = Now(), c0 = CpuSeconds();
    RETURN_IF_ERROR(fn(i >= s.warmup));
    if (i >= s.warmup) {
      t->samples.push_back(Now() - t0);
      t->cpu_samples.push_back(CpuSeconds() - c0);
    }
  }
  if (!t->samples.empty()) {
    t->median = Median(t->samples);
    t->cpu_median = Median(t->cpu_samples);
  }
  return absl::OkStatus();
}

// The module on the XLA CPU plugin: every run compiles (its compile time
// recorded apart) and times transfers + execution. A failure lands in
// t->error.
void TimePjrt(const hlo::HloModule& module, bool partitioned,
              const std::vector<std::vector<Literal>>& per_device,
              absl::Span<const Literal> args, const BenchSettings& s, Timing* t) {
  runtime::pjrt::ExecuteOptions o;
  o.plugin_path = s.pjrt_plugin;
  std::vector<absl::Span<const Literal>> spans;
  if (partitioned) {
    spans.assign(per_device.begin(), per_device.end());
  } else {
    spans.push_back(args);
  }
  std::vector<double> compile;
  for (int i = 0; i < s.warmup + s.reps; ++i) {
    absl::StatusOr<runtime::pjrt::ExecuteResult> r =
        runtime::pjrt::Execute(module, absl::MakeConstSpan(spans), o);
    if (!r.ok()) {
      t->error = std::string(r.status().message());
      t->samples.clear();
      return;
    }
    compile.push_back(r->compile_seconds);
    if (i >= s.warmup) t->samples.push_back(r->execute_seconds);
  }
  if (!t->samples.empty()) t->median = Median(t->samples);
  if (!compile.empty()) t->compile_seconds = Median(compile);
}

// The jax_grpo.GrpoParams of a GRPO kernel, or the entropy reference.
nlohmann::ordered_json JaxRefJson(const kernels::KernelSpec& spec) {
  using Json = nlohmann::ordered_json;
  const kernels::GrpoConfig& c = spec.config;
  if (kernels::IsEntropyKernel(spec.kind)) {
    return {{"kind", "entropy"}, {"temperature", c.temperature}};
  }
  const bool fused = spec.kind == kernels::KernelKind::kGrpoFusedLinear;
  return {{"kind", fused ? "grpo_fused" : "grpo"},
          {"params",
           {{"eps_low", c.eps_low},
            {"eps_high", c.eps_high},
            {"temperature", c.temperature},
            {"temp_mode", kernels::TemperatureModeName(c.temperature_mode)},
            {"beta", c.beta},
            {"delta", c.delta ? Json(*c.delta) : Json(nullptr)},
            {"loss_type", kernels::LossTypeName(c.loss_type)},
            {"max_len", c.max_len ? Json(*c.max_len) : Json(nullptr)},
            {"total_valid_tokens", c.token_count_input ? Json(1.0) : Json(nullptr)},
            {"on_policy", c.on_policy},
            {"logits_dtype", hlo::PrimitiveTypeName(c.logits_type)}}}};
}

absl::Status WriteBytes(const std::string& path, const void* data, int64_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::InternalError(absl::StrCat("bench: cannot write ", path));
  const bool ok = size == 0 || std::fwrite(data, 1, size, f) == static_cast<size_t>(size);
  if (std::fclose(f) != 0 || !ok) {
    return absl::InternalError(absl::StrCat("bench: short write to ", path));
  }
  return absl::OkStatus();
}

void FillTiming(const nlohmann::json& j, Timing* t) {
  if (!j.is_object()) return;
  if (auto e = j.find("error"); e != j.end() && e->is_string()) {
    t->error = e->get<std::string>();
    return;
  }
  if (auto m = j.find("median_s"); m != j.end() && m->is_number()) {
    t->median = m->get<double>();
  }
  if (auto c = j.find("compile_s"); c != j.end() && c->is_number()) {
    t->compile_seconds = c->get<double>();
  }
  if (auto r = j.find("peak_rss_bytes"); r != j.end() && r->is_number()) {
    t->peak_rss_bytes = static_cast<int64_t>(r->get<double>());
  }
  if (auto s = j.find("times_s"); s != j.end() && s->is_array()) {
    for (const auto& v : *s) {
      if (v.is_number()) t->samples.push_back(v.get<double>());
    }
  }
}

// Writes CASE_DIR/module.hlo and manifest.json for bench_xla.py, on the
// inputs in `inputs_dir`; returns an error message or "".
std::string PrepareXlaCase(const hlo::HloModule& module, const kernels::KernelSpec& spec,
                           const std::vector<std::string>& param_names,
                           const std::vector<hlo::Shape>& param_shapes, int64_t num_partitions,
                           const std::string& case_dir, const std::string& inputs_dir,
                           bool with_jax, const BenchSettings& s) {
  std::error_code ec;
  std::filesystem::create_directories(case_dir, ec);
  absl::StatusOr<std::string> text = SerializeModule(module, ModuleFormat::kText);
  if (!text.ok()) return std::string(text.status().message());
  if (absl::Status st = WriteBytes(case_dir + "/module.hlo", text->data(), text->size());
      !st.ok()) {
    return std::string(st.message());
  }
  nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
  for (size_t i = 0; i < param_names.size(); ++i) {
    inputs.push_back({{"name", param_names[i]},
                      {"dtype", hlo::PrimitiveTypeName(param_shapes[i].element_type())},
                      {"shape", param_shapes[i].dimensions()},
                      {"file", absl::StrCat(inputs_dir, "/", param_names[i], ".bin")}});
  }
  const std::string manifest =
      JsonText({{"module", "module.hlo"},
                {"num_partitions", num_partitions},
                {"reps", s.reps},
                {"warmup", s.warmup},
                {"inputs", std::move(inputs)},
                {"jax_ref", with_jax ? JaxRefJson(spec) : nlohmann::ordered_json(nullptr)}});
  if (absl::Status st = WriteBytes(case_dir + "/manifest.json", manifest.data(),
                                   manifest.size());
      !st.ok()) {
    return std::string(st.message());
  }
  return "";
}

// One bench_xla.py process with `flag` (--no-jax or --no-xla); the side it
// ran is `key` in its JSON.
void RunXlaProcess(const BenchSettings& s, const std::string& case_dir, const char* flag,
                   const char* key, Timing* t) {
  const std::string err_file = absl::StrCat(case_dir, "/stderr", flag, ".txt");
  const std::string cmd = absl::StrCat(ShellQuote(s.xla_python), " ", ShellQuote(s.xla_script),
                                       " ", ShellQuote(case_dir), " ", flag, " 2> ",
                                       ShellQuote(err_file));
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    t->error = "cannot start " + s.xla_python;
    return;
  }
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, got);
  const int status = pclose(p);
  // The JSON is the last non-empty line.
  std::string line;
  for (absl::string_view l : absl::StrSplit(out, '\n', absl::SkipWhitespace())) {
    line = std::string(l);
  }
  const nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (status != 0 || !json.is_object()) {
    t->error = absl::StrCat("bench_xla.py ", flag, " failed (", ExitText(status), "); see ",
                            err_file);
    return;
  }
  if (auto it = json.find(key); it != json.end()) FillTiming(*it, t);
}

bool IsGrpoKernel(const std::string& kernel) { return kernel.rfind("grpo_", 0) == 0; }

struct DotInfo {
  double flops = 0;
  bool bf16 = false;  // both operands bf16
};

// Every dot of the module by instruction name: 2 * |result| * |contracted|.
std::map<std::string, DotInfo> DotsByName(const hlo::HloModule& m) {
  std::map<std::string, DotInfo> dots;
  for (const auto& c : m.computations()) {
    for (const auto& x : c->instructions()) {
      if (x->opcode() != hlo::HloOpcode::kDot) continue;
      double contracted = 1;
      for (int64_t d : x->attrs().dot.lhs_contracting_dimensions) {
        contracted *= static_cast<double>(x->operand(0)->shape().dimensions(d));
      }
      dots[x->name()] = {2.0 * static_cast<double>(x->shape().num_elements()) * contracted,
                         x->operand(0)->shape().element_type() == hlo::PrimitiveType::kBF16 &&
                             x->operand(1)->shape().element_type() == hlo::PrimitiveType::kBF16};
    }
  }
  return dots;
}

}  // namespace

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Why a shell command's child failed, from pclose's status.
std::string ExitText(int status) {
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  if (!WIFEXITED(status)) return absl::StrCat("status ", status);
  const int code = WEXITSTATUS(status);
  // The shell reports a child killed by signal N as exit 128 + N; SIGKILL
  // (9) is what the kernel's out-of-memory killer sends.
  if (code == 128 + 9) return "killed by SIGKILL (out of host memory?)";
  if (code > 128) return absl::StrCat("killed by signal ", code - 128);
  return absl::StrCat("exit ", code);
}

absl::StatusOr<std::vector<Literal>> MakeBenchInputs(const KernelFlags& kernel,
                                                     std::vector<std::string>* names) {
  KernelFlags k = kernel;
  if (k.kernel != "grpo_fused_linear") k.kernel = "grpo_tiled";
  k.mode = "fwd_bwd";
  ASSIGN_OR_RETURN(std::unique_ptr<hlo::HloModule> m, BuildKernelModule(k));
  const hlo::HloComputation& entry = *m->entry();
  names->clear();
  for (int64_t i = 0; i < entry.num_parameters(); ++i) {
    names->push_back(entry.parameter(i)->name());
  }
  RandomInputOptions o;
  o.temperature = k.temperature;
  o.post_lse = k.temperature_mode == "post_lse";
  return MakeRandomInputs(entry, o);
}

absl::StatusOr<CaseResult> RunBenchCase(const BenchCase& c, const std::string& dtype,
                                        absl::Span<const Literal> inputs,
                                        const std::vector<std::string>& names,
                                        const Bandwidth& bw, const BenchSettings& s,
                                        const std::string& xla_inputs_dir) {
  CaseResult r;
  r.bench = c;
  r.dtype = dtype;
  // Each case starts without host blocks cached by the previous one (other
  // sizes): its warm-up run fills the cache its timed runs reuse.
  runtime::ReleaseHostCache();
  ASSIGN_OR_RETURN(std::unique_ptr<hlo::HloModule> module,
                   BuildShardedModule(c.kernel, c.shard));
  ASSIGN_OR_RETURN(kernels::KernelSpec spec, KernelSpecFromFlags(c.kernel));
  const bool partitioned = hlo::IsPartitionedModule(*module);
  std::optional<hlo::PartitionedSignature> sig;
  std::unique_ptr<hlo::HloComputation> global_params;
  if (partitioned) {
    ASSIGN_OR_RETURN(sig, hlo::GetPartitionedSignature(*module));
    global_params = GlobalParameterComputation(*sig);
  }
  const hlo::HloComputation& params = partitioned ? *global_params : *module->entry();
  std::vector<std::string> param_names;
  std::vector<hlo::Shape> param_shapes;
  for (int64_t i = 0; i < params.num_parameters(); ++i) {
    param_names.push_back(params.parameter(i)->name());
    param_shapes.push_back(params.parameter(i)->shape());
    if (i >= static_cast<int64_t>(names.size()) || names[i] != param_names.back()) {
      return absl::InternalError(absl::StrCat("bench: ", c.name, ": parameter ", i, " (",
                                              param_names.back(),
                                              ") is not the shared input of that position"));
    }
  }
  absl::Span<const Literal> args = inputs.first(params.num_parameters());

  // The emulator. A partitioned case gets per-device arrays, split once
  // before the timed runs and its outputs assembled once after them.
  runtime::RunOptions options;
  options.num_threads = s.num_threads;
  options.record_allocations = false;
  const int64_t num_devices = std::max<int64_t>(module->num_partitions(), 1);
  std::vector<std::vector<Literal>> per_device;
  if (partitioned) {
    const double t0 = Now();
    ASSIGN_OR_RETURN(per_device, runtime::SplitArguments(*sig, args));
    r.host_io_seconds += Now() - t0;
  }
  std::vector<Literal> outputs;
  RETURN_IF_ERROR(TimeIt(s, &r.emulator, [&](bool timed) -> absl::Status {
    outputs.clear();
    ResetPeakRss();
    absl::StatusOr<runtime::RunResult> res = partitioned
                                                 ? runtime::RunSpmd(*module, per_device, options)
                                                 : runtime::RunModule(*module, args, options);
    if (!res.ok()) return res.status();
    if (timed) {
      r.rss_peak_bytes = std::max(r.rss_peak_bytes, PeakRssBytes());
      for (const runtime::DeviceReport& d : res->devices) {
        r.hbm_peak_bytes = std::max(r.hbm_peak_bytes, d.stats.peak_bytes);
      }
    }
    outputs = std::move(res->outputs);
    return absl::OkStatus();
  }));
  // Where the matrix products' time goes: one traced run, its dot steps.
  if (const std::map<std::string, DotInfo> dots = DotsByName(*module); !dots.empty()) {
    runtime::RunOptions traced = options;
    traced.record_trace = true;
    absl::StatusOr<runtime::RunResult> res = partitioned
                                                 ? runtime::RunSpmd(*module, per_device, traced)
                                                 : runtime::RunModule(*module, args, traced);
    if (!res.ok()) return res.status();
    for (const runtime::TraceEvent& e : res->trace.events()) {
      auto it = dots.find(e.name);
      if (e.track != runtime::kHostTrack || it == dots.end()) continue;
      r.gemm_flops += it->second.flops;
      r.gemm_seconds += e.duration_us * 1e-6;
      if (it->second.bf16) {
        r.gemm_bf16_flops += it->second.flops;
        r.gemm_bf16_seconds += e.duration_us * 1e-6;
      }
    }
  }
  if (!s.pjrt_plugin.empty()) TimePjrt(*module, partitioned, per_device, args, s, &r.pjrt);
  per_device.clear();
  if (partitioned) {
    const double t0 = Now();
    ASSIGN_OR_RETURN(outputs, runtime::AssembleOutputs(
                                  *sig, outputs, OutputNames(*module, sig->global_outputs.size())));
    r.host_io_seconds += Now() - t0;
  }

  // The physical references (none for the fused kernel: a matmul bounds it,
  // not the logits' bytes).
  const bool entropy = kernels::IsEntropyKernel(spec.kind);
  const bool fused = spec.kind == kernels::KernelKind::kGrpoFusedLinear;
  const bool backward = !entropy && c.kernel.mode != "fwd";
  const bool forward = entropy || c.kernel.mode != "bwd";
  if (!fused) {
    const double logits_bytes = static_cast<double>(args[0].raw_size());
    r.bound_seconds = BandwidthBoundSeconds(
        bw, logits_bytes * ((forward ? 1 : 0) + (backward ? 1 : 0)), backward ? logits_bytes : 0);
  }
  if (s.with_floor && !fused && (entropy || IsGrpoKernel(c.kernel.kernel)) && forward) {
    FloorOptions fo;
    fo.backward = backward;
    fo.entropy_only = entropy;
    fo.num_threads = s.num_threads;
    FloorOutputs floor;
    // The anchor the emulator is divided by: at least kMinFloorReps timed
    // runs whatever --reps (each is a fraction of a second), so that one
    // slow sample (a thread descheduled on this 2-core guest: 0.116 s for
    // 0.163 s of CPU against 75-80 ms otherwise) is not the floor.
    BenchSettings floor_settings = s;
    floor_settings.reps = std::max(s.reps, kMinFloorReps);
    absl::Status st = TimeIt(floor_settings, &r.floor, [&](bool) -> absl::Status {
      floor = FloorOutputs();
      ASSIGN_OR_RETURN(floor, RunFloor(spec.config, params, args, fo));
      return absl::OkStatus();
    });
    if (!st.ok()) {
      r.floor.error = std::string(st.message());
    } else if (!outputs.empty()) {
      // entropy: the only output; GRPO: outputs loss, ptl, logp, entropy, lse[, dlogits].
      const Literal& emu_entropy = entropy ? outputs[0] : outputs[3];
      double worst = MaxScaledDifference(floor.entropy.data(), emu_entropy, 1e-3, 1e-3);
      if (backward) {
        const Literal& emu_dl = outputs.back();
        double scale = 0;
        for (int64_t i = 0; i < std::min<int64_t>(emu_dl.num_elements(), 1 << 20); ++i) {
          scale = std::max(scale, std::fabs(emu_dl.GetAsDouble(i)));
        }
        worst = std::max(worst, MaxScaledDifference(floor.dlogits.get(), emu_dl, 1e-4 * scale, 2e-2));
      }
      r.floor_check = worst;
    }
  }
  outputs.clear();

  if (!s.xla_python.empty() && !xla_inputs_dir.empty()) {
    r.xla_case_dir = absl::StrCat(s.work_dir, "/", c.kernel.kernel, "_", c.kernel.mode, "_",
                                  c.shard.shard, "_", dtype);
    r.xla_with_jax = s.with_jax && c.shard.shard == "none";
    r.xla.error = PrepareXlaCase(*module, spec, param_names, param_shapes,
                                 partitioned ? num_devices : 1, r.xla_case_dir, xla_inputs_dir,
                                 r.xla_with_jax, s);
    if (!r.xla.error.empty()) r.xla_case_dir.clear();
  }
  return r;
}

void RunXlaSide(const BenchSettings& s, CaseResult* r) {
  if (r->xla_case_dir.empty()) return;
  RunXlaProcess(s, r->xla_case_dir, "--no-jax", "xla", &r->xla);
  if (r->xla_with_jax) RunXlaProcess(s, r->xla_case_dir, "--no-xla", "jax", &r->jax);
}

absl::Status WriteXlaInputs(const std::string& dir, absl::Span<const Literal> inputs,
                            const std::vector<std::string>& names) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("bench: cannot create ", dir));
  for (size_t i = 0; i < inputs.size() && i < names.size(); ++i) {
    RETURN_IF_ERROR(WriteBytes(absl::StrCat(dir, "/", names[i], ".bin"), inputs[i].raw(),
                               inputs[i].raw_size()));
  }
  return absl::OkStatus();
}

}  // namespace tpuoff::tools

#include "tools/cli/bench_corpus.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/emulator/executor.h"
#include "tools/io/module_io.h"
#include "tools/io/npy.h"

namespace tpuoff::tools {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The emulator on CASE/jax.hlo and CASE/in/arg<i>.npy: warmup + reps runs.
void TimeEmulator(const std::filesystem::path& case_dir, const BenchSettings& s, CorpusRow* row) {
  const std::string path = (case_dir / "jax.hlo").string();
  absl::StatusOr<std::unique_ptr<hlo::HloModule>> module =
      LoadModuleFile(path, ModuleFormat::kText);
  if (!module.ok()) {
    row->emulator.error = std::string(module.status().message());
    return;
  }
  if (absl::Status st = PrepareForExecution(module->get(), path); !st.ok()) {
    row->emulator.error = std::string(st.message());
    return;
  }
  for (const auto& c : (*module)->computations()) {
    row->instructions += static_cast<int64_t>(c->instructions().size());
  }
  const hlo::HloComputation& entry = *(*module)->entry();
  std::vector<hlo::Literal> args;
  for (int64_t i = 0; i < entry.num_parameters(); ++i) {
    absl::StatusOr<hlo::Literal> arg = ReadNpyAsLiteral(
        (case_dir / "in" / absl::StrCat("arg", i, ".npy")).string(), entry.parameter(i)->shape());
    if (!arg.ok()) {
      row->emulator.error = std::string(arg.status().message());
      return;
    }
    args.push_back(*std::move(arg));
  }
  runtime::RunOptions options;
  options.num_threads = s.num_threads;
  options.record_allocations = false;
  // Planning (the emulator's compile) and runs of the planned module apart.
  std::unique_ptr<runtime::PreparedModule> prepared;
  auto plan = [&]() -> absl::Status {
    absl::StatusOr<std::unique_ptr<runtime::PreparedModule>> p =
        runtime::PreparedModule::Create(**module, options);
    if (!p.ok()) return p.status();
    prepared = *std::move(p);
    return absl::OkStatus();
  };
  auto run = [&]() -> absl::Status { return prepared->Run(args, options).status(); };
  for (auto [t, fn] : {std::pair<Timing*, absl::FunctionRef<absl::Status()>>{&row->plan, plan},
                       {&row->emulator, run}}) {
    for (int i = 0; i < s.warmup + s.reps; ++i) {
      const double t0 = Now(), c0 = CpuSeconds();
      const absl::Status st = fn();
      const double wall = Now() - t0, cpu = CpuSeconds() - c0;
      if (!st.ok()) {
        row->emulator.error = std::string(st.message());
        return;
      }
      if (i >= s.warmup) {
        t->samples.push_back(wall);
        t->cpu_samples.push_back(cpu);
      }
    }
    t->median = Median(t->samples);
    t->cpu_median = Median(t->cpu_samples);
  }
}

// bench_corpus.py time DIR --only=... in one process; fills each row's xla.
void TimeXla(const std::string& corpus_dir, const BenchSettings& s, std::vector<CorpusRow>* rows) {
  std::string only;
  for (const CorpusRow& r : *rows) {
    if (r.emulator.error.empty()) absl::StrAppend(&only, only.empty() ? "" : ",", r.name);
  }
  if (only.empty()) return;
  const std::string script =
      (std::filesystem::path(s.xla_script).parent_path() / "bench_corpus.py").string();
  const std::string cmd =
      absl::StrCat(ShellQuote(s.xla_python), " ", ShellQuote(script), " time ",
                   ShellQuote(corpus_dir), " --only=", ShellQuote(only), " --reps=", s.reps,
                   " --warmup=", s.warmup, " 2> /dev/null");
  std::FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (p != nullptr) {
    char buf[4096];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, got);
  }
  const int status = p == nullptr ? -1 : pclose(p);
  std::string line;
  for (absl::string_view l : absl::StrSplit(out, '\n', absl::SkipWhitespace())) {
    line = std::string(l);
  }
  const nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (status != 0 || !json.is_object() || !json.contains("cases")) {
    for (CorpusRow& r : *rows) {
      if (r.emulator.error.empty()) {
        r.xla.error = absl::StrCat("bench_corpus.py failed (", ExitText(status), ")");
      }
    }
    return;
  }
  for (CorpusRow& r : *rows) {
    auto it = json["cases"].find(r.name);
    if (it == json["cases"].end()) continue;
    if (it->contains("error")) {
      r.xla.error = (*it)["error"].get<std::string>();
      continue;
    }
    if (it->contains("median_s")) r.xla.median = (*it)["median_s"].get<double>();
    if (it->contains("compile_s")) r.xla.compile_seconds = (*it)["compile_s"].get<double>();
    if (it->contains("times_s")) {
      for (const auto& v : (*it)["times_s"]) r.xla.samples.push_back(v.get<double>());
    }
  }
}

std::string Seconds(const Timing& t) {
  if (!t.error.empty()) return "error";
  if (!t.median) return "-";
  const double s = *t.median;
  if (s >= 0.1) return absl::StrFormat("%.3f s", s);
  if (s >= 1e-3) return absl::StrFormat("%.3g ms", s * 1e3);
  return absl::StrFormat("%.3g us", s * 1e6);
}

}  // namespace

absl::StatusOr<std::vector<CorpusRow>> RunCorpusBench(const std::string& corpus_dir,
                                                      const BenchSettings& s) {
  const std::filesystem::path dir(corpus_dir);
  std::ifstream in(dir / "index.json");
  if (!in) {
    return absl::NotFoundError(absl::StrCat("--corpus: cannot read ", corpus_dir,
                                            "/index.json (a jax_corpus.py corpus)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json index = nlohmann::json::parse(text.str(), nullptr, false);
  if (!index.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--corpus: ", corpus_dir, "/index.json is not a list of programs"));
  }
  std::vector<CorpusRow> rows;
  for (const nlohmann::json& meta : index) {
    if (!meta.is_object() || !meta.contains("name") || !meta["name"].is_string()) continue;
    const bool sharded = meta.value("sharded", false);
    const bool unsupported = meta.contains("unsupported") && meta["unsupported"].is_string() &&
                             !meta["unsupported"].get<std::string>().empty();
    if (sharded || unsupported) continue;
    CorpusRow row;
    row.corpus = corpus_dir;
    row.name = meta["name"].get<std::string>();
    TimeEmulator(dir / row.name, s, &row);
    std::fprintf(stderr, "tpuoff bench: corpus %s: emulator %s\n", row.name.c_str(),
                 row.emulator.error.empty() ? Seconds(row.emulator).c_str()
                                            : row.emulator.error.c_str());
    rows.push_back(std::move(row));
  }
  if (!s.xla_python.empty() && !s.xla_script.empty()) TimeXla(corpus_dir, s, &rows);
  return rows;
}

std::string CorpusTable(const std::vector<CorpusRow>& rows) {
  std::string out =
      "| corpus | program | instructions | emulator | emulator plan | XLA:CPU | emu/XLA "
      "| (plan + emu)/XLA |\n"
      "|---|---|---|---|---|---|---|---|\n";
  auto ratio = [](std::optional<double> a, std::optional<double> b) -> std::string {
    if (!a || !b || *b <= 0) return "-";
    return absl::StrFormat("%.2f", *a / *b);
  };
  for (const CorpusRow& r : rows) {
    std::optional<double> both;
    if (r.emulator.median && r.plan.median) both = *r.emulator.median + *r.plan.median;
    absl::StrAppend(&out, "| ", std::filesystem::path(r.corpus).filename().string(), " | ",
                    r.name, " | ", r.instructions, " | ", Seconds(r.emulator), " | ",
                    Seconds(r.plan), " | ", Seconds(r.xla), " | ",
                    ratio(r.emulator.median, r.xla.median), " | ", ratio(both, r.xla.median),
                    " |\n");
  }
  return out;
}

}  // namespace tpuoff::tools

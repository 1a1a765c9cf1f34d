#include "tools/cli/bench_cold.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "runtime/cpu/host_memory.h"

extern char** environ;

namespace tpuoff::tools {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <typename T>
T Median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct ChildResult {
  double wall = 0, cpu = 0;
  int64_t minor_faults = 0;
  std::string error;
};

// Runs binary + args with stdout to /dev/null and stderr to `err_path`;
// `env` "NAME=value" entries replace or add to this process's environment.
ChildResult RunChild(const std::string& binary, const std::vector<std::string>& args,
                     const std::string& err_path, const std::vector<std::string>& env = {}) {
  ChildResult r;
  std::vector<std::string> all = {binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> env_strings = env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(env.begin(), env.end(), [&](const std::string& x) {
      return x.compare(0, name.size() + 1, name + "=") == 0;
    });
    if (!replaced) env_strings.push_back(entry);
  }
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid;
  const double t0 = Now();
  const int rc = posix_spawn(&pid, binary.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    r.error = absl::StrCat("cannot start ", binary, ": ", std::strerror(rc));
    return r;
  }
  int status = 0;
  rusage u{};
  pid_t got;
  do {
    got = wait4(pid, &status, 0, &u);
  } while (got < 0 && errno == EINTR);
  r.wall = Now() - t0;
  r.cpu = u.ru_utime.tv_sec + u.ru_stime.tv_sec +
          1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  r.minor_faults = u.ru_minflt;
  if (got < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(err_path);
    std::stringstream text;
    text << in.rdbuf();
    std::string tail = text.str();
    if (tail.size() > 400) tail = tail.substr(tail.size() - 400);
    r.error = absl::StrCat(
        "tpuoff run ",
        WIFSIGNALED(status) ? absl::StrCat("killed by signal ", WTERMSIG(status))
                            : absl::StrCat("exited ", WEXITSTATUS(status)),
        ": ", tail);
  }
  return r;
}

}  // namespace

std::vector<std::string> ColdRunArguments(const BenchCase& c, int num_threads) {
  const KernelFlags& k = c.kernel;
  std::vector<std::string> a = {"run",
                                absl::StrCat("--kernel=", k.kernel),
                                absl::StrCat("--mode=", k.mode),
                                absl::StrCat("--batch=", k.batch),
                                absl::StrCat("--seq=", k.seq),
                                absl::StrCat("--vocab=", k.vocab),
                                absl::StrCat("--logits-dtype=", k.logits_dtype)};
  if (k.kernel == "grpo_fused_linear") {
    a.push_back(absl::StrCat("--hidden=", k.hidden));
    if (k.dlogits_dtype != "f32") a.push_back(absl::StrCat("--dlogits-dtype=", k.dlogits_dtype));
  } else {
    a.push_back(absl::StrCat("--block-size=", k.block_size));
  }
  if (c.shard.shard != "none") {
    a.push_back(absl::StrCat("--mesh=", c.shard.mesh));
    a.push_back(absl::StrCat("--shard=", c.shard.shard));
  }
  if (num_threads > 0) a.push_back(absl::StrCat("--threads=", num_threads));
  a.push_back("--random-inputs");
  return a;
}

void TimeColdRuns(const std::string& binary, const BenchCase& c, int reps, int num_threads,
                  Timing* t, int64_t* minor_faults, std::optional<double>* empty_jit_cache) {
  char tmpl[] = "/tmp/tpuoff-bench-cold-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) {
    t->error = "cannot create a file for the cold run's stderr";
    return;
  }
  close(fd);
  const std::vector<std::string> args = ColdRunArguments(c, num_threads);
  std::vector<int64_t> faults;
  for (int i = 0; i < reps; ++i) {
    ChildResult r = RunChild(binary, args, tmpl);
    if (!r.error.empty()) {
      t->error = r.error;
      t->samples.clear();
      t->cpu_samples.clear();
      faults.clear();
      break;
    }
    t->samples.push_back(r.wall);
    t->cpu_samples.push_back(r.cpu);
    faults.push_back(r.minor_faults);
  }
  if (!t->samples.empty()) {
    t->median = Median(t->samples);
    t->cpu_median = Median(t->cpu_samples);
    *minor_faults = Median(faults);
    // Once more with an empty JIT disk cache (a new directory, removed
    // after): the loops compiled, as on the first run after a rebuild.
    char dir[] = "/tmp/tpuoff-bench-jit-XXXXXX";
    if (empty_jit_cache != nullptr && mkdtemp(dir) != nullptr) {
      ChildResult r = RunChild(binary, args, tmpl, {absl::StrCat("TPUOFF_JIT_CACHE=", dir)});
      if (r.error.empty()) *empty_jit_cache = r.wall;
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  }
  std::remove(tmpl);
}

std::optional<double> TimeFreshPages(int64_t bytes, int reps) {
  if (bytes <= 0 || reps <= 0) return std::nullopt;
  std::vector<double> samples;
  for (int i = 0; i < reps; ++i) {
    const double t0 = Now();
    void* p = runtime::HostMapFresh(static_cast<size_t>(bytes));
    if (p == nullptr) return std::nullopt;
    runtime::HostUnmapFresh(p, static_cast<size_t>(bytes));
    samples.push_back(Now() - t0);
  }
  return Median(samples);
}

}  // namespace tpuoff::tools

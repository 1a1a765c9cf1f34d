// The loop JIT's disk cache (runtime/emulator/jit_disk_cache.h): its file
// format refuses anything that is not a whole entry of the same key, a
// cache that cannot be written is no error, and `tpuoff run` processes
// that load compiled loops from it give the same bits as compiling them
// (and as the interpreter), also after the files are corrupted.
#include "runtime/emulator/jit_disk_cache.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/emulator/loop_jit.h"

namespace tpuoff::runtime {
namespace {

namespace fs = std::filesystem;

std::string TempDir() {
  std::string t = (fs::temp_directory_path() / "tpuoff_jit_cache.XXXXXX").string();
  EXPECT_NE(mkdtemp(t.data()), nullptr);
  return t;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().string());
  return files;
}

TEST(JitDiskCache, RoundTripsAndRefusesWhatDoesNotMatch) {
  const std::string dir = TempDir() + "/nested/jit";  // created on the first store
  const std::string key = "llvm 14\ncpu x\nw16f|E3:...;";
  std::string object(3000, '\0');
  for (size_t i = 0; i < object.size(); ++i) object[i] = static_cast<char>(i * 7);
  EXPECT_FALSE(LoadJitObject(dir, key).has_value());
  ASSERT_TRUE(StoreJitObject(dir, key, object));
  ASSERT_EQ(LoadJitObject(dir, key), object);
  EXPECT_EQ(JitCacheName(key).size(), 32u);
  EXPECT_EQ(JitCacheName(key), JitCacheName(std::string(key)));
  EXPECT_NE(JitCacheName(key), JitCacheName(key + " "));

  const std::string path = dir + "/" + JitCacheName(key) + ".o";
  const std::string whole = ReadAll(path);
  ASSERT_GT(whole.size(), object.size());
  // Every single flipped byte (header or object) and every truncation is
  // refused, never returned as an object.
  for (size_t at : {size_t{0}, size_t{5}, whole.size() - object.size() - 3, whole.size() - 1,
                    whole.size() - 1500}) {
    std::string bad = whole;
    bad[at] = static_cast<char>(bad[at] ^ 0x20);
    WriteAll(path, bad);
    EXPECT_FALSE(LoadJitObject(dir, key).has_value()) << "flipped byte " << at;
  }
  for (size_t len : {size_t{0}, size_t{10}, whole.size() - 1}) {
    WriteAll(path, whole.substr(0, len));
    EXPECT_FALSE(LoadJitObject(dir, key).has_value()) << "truncated to " << len;
  }
  // Another key under the same file name (a collision) is not this key's.
  WriteAll(path, whole);
  ASSERT_TRUE(StoreJitObject(dir, "another key", object));
  fs::rename(dir + "/" + JitCacheName("another key") + ".o", path);
  EXPECT_FALSE(LoadJitObject(dir, key).has_value());
  // A store replaces a bad entry; no temporary file is left.
  ASSERT_TRUE(StoreJitObject(dir, key, object));
  EXPECT_EQ(LoadJitObject(dir, key), object);
  for (const std::string& f : Entries(dir)) {
    EXPECT_EQ(fs::path(f).extension(), ".o") << f;
  }
  fs::remove_all(fs::path(dir).parent_path().parent_path());
}

TEST(JitDiskCache, UnusableDirectoriesAreNotErrors) {
  const std::string base = TempDir();
  WriteAll(base + "/file", "x");
  EXPECT_FALSE(StoreJitObject(base + "/file/jit", "k", "object"));  // a file in the way
  EXPECT_FALSE(LoadJitObject(base + "/file/jit", "k").has_value());
  EXPECT_FALSE(StoreJitObject("", "k", "object"));
  if (geteuid() != 0) {  // root writes anywhere
    fs::create_directory(base + "/ro");
    chmod((base + "/ro").c_str(), 0500);
    EXPECT_FALSE(StoreJitObject(base + "/ro", "k", "object"));
  }
  fs::remove_all(base);
}

TEST(JitDiskCache, DirectoryFromTheEnvironment) {
  auto with = [](const char* cache, const char* xdg, const char* home) {
    auto set = [](const char* name, const char* v) {
      if (v == nullptr) {
        unsetenv(name);
      } else {
        setenv(name, v, 1);
      }
    };
    set("TPUOFF_JIT_CACHE", cache);
    set("XDG_CACHE_HOME", xdg);
    set("HOME", home);
    return JitCacheDirectory();
  };
  const char* saved_home = getenv("HOME");
  const std::string home = saved_home ? saved_home : "";
  EXPECT_EQ(with("/c/jit", "/x", "/h"), "/c/jit");
  EXPECT_EQ(with("off", "/x", "/h"), "");
  EXPECT_EQ(with("0", "/x", "/h"), "");
  EXPECT_EQ(with(nullptr, "/x", "/h"), "/x/tpuoff/jit");
  EXPECT_EQ(with(nullptr, "relative", "/h"), "/h/.cache/tpuoff/jit");
  EXPECT_EQ(with(nullptr, nullptr, nullptr), "");
  unsetenv("TPUOFF_JIT_CACHE");
  unsetenv("XDG_CACHE_HOME");
  if (saved_home) setenv("HOME", home.c_str(), 1);
}

// `tpuoff run` with every fused loop compiled: its output lines.
std::string RunTpuoff(const std::string& env) {
  const std::string cmd = env + " TPUOFF_JIT=always " TPUOFF_BINARY
                          " run --kernel=grpo_tiled --mode=fwd_bwd --batch=2 --seq=16"
                          " --vocab=4099 --logits-dtype=bf16 --random-inputs --seed=4 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "popen failed";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  std::stringstream kept;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("output ", 0) == 0) kept << line << "\n";
  }
  return status == 0 ? kept.str() : "exit " + std::to_string(status) + ": " + out;
}

TEST(JitDiskCache, ProcessesLoadingCompiledLoopsGiveTheSameBits) {
  if (!LoopJitAvailable()) GTEST_SKIP() << "built without the loop JIT";
  const std::string dir = TempDir() + "/jit";
  const std::string cache = "TPUOFF_JIT_CACHE=" + dir;
  const std::string interpreted = RunTpuoff("TPUOFF_JIT_CACHE=off TPUOFF_JIT=never");
  ASSERT_NE(interpreted.find("output dlogits"), std::string::npos) << interpreted;
  ASSERT_EQ(RunTpuoff(cache), interpreted);  // compiles and stores
  const std::vector<std::string> files = Entries(dir);
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(RunTpuoff(cache), interpreted);  // loads
  EXPECT_EQ(Entries(dir).size(), files.size());
  // Corrupted entries: refused, compiled again, replaced by good ones.
  std::vector<std::string> good, bad;
  for (const std::string& f : files) {
    good.push_back(ReadAll(f));
    std::string bytes = good.back();
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 1);
    WriteAll(f, bytes);
    bad.push_back(bytes);
  }
  EXPECT_EQ(RunTpuoff(cache), interpreted);
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(ReadAll(files[i]), good[i]) << files[i];
  }
  EXPECT_EQ(RunTpuoff(cache), interpreted);
  // A cache that cannot be created: the run is unaffected.
  WriteAll(dir + "/../blocker", "x");
  EXPECT_EQ(RunTpuoff("TPUOFF_JIT_CACHE=" + dir + "/../blocker/jit"), interpreted);
  fs::remove_all(fs::path(dir).parent_path());
}

}  // namespace
}  // namespace tpuoff::runtime

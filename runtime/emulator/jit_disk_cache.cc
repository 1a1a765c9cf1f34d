#include "runtime/emulator/jit_disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tpuoff::runtime {
namespace {

constexpr std::string_view kMagic = "tpuoff-jit-cache 1\n";
constexpr int64_t kMaxObjectBytes = int64_t{256} << 20;

// This abseil's string_view is its own type.
absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

uint64_t Fnv1a(std::string_view s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}
uint64_t ObjectHash(std::string_view object) { return Fnv1a(object, 0xcbf29ce484222325ull); }

// mkdir -p, owner-only for what it creates.
bool MakeDirectories(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string prefix = dir.substr(0, i);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// "<key length>\n<key><object length> <object hash>\n" after the magic.
std::string Header(std::string_view key, std::string_view object) {
  return absl::StrCat(A(kMagic), key.size(), "\n", A(key), object.size(), " ",
                      absl::StrFormat("%016x", ObjectHash(object)), "\n");
}

// Reads a decimal number up to `stop` from the front of `rest`.
std::optional<uint64_t> TakeNumber(std::string_view* rest, char stop, int base = 10) {
  const size_t end = rest->find(stop);
  if (end == std::string_view::npos || end == 0 || end > 20) return std::nullopt;
  uint64_t v = 0;
  const std::string_view digits = rest->substr(0, end);
  const bool ok =
      base == 16 ? absl::SimpleHexAtoi(A(digits), &v) : absl::SimpleAtoi(A(digits), &v);
  if (!ok) return std::nullopt;
  rest->remove_prefix(end + 1);
  return v;
}

}  // namespace

std::string JitCacheDirectory() {
  if (const char* v = std::getenv("TPUOFF_JIT_CACHE"); v != nullptr && *v != '\0') {
    const std::string s = v;
    if (s == "off" || s == "0") return "";
    return s;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return absl::StrCat(xdg, "/tpuoff/jit");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    return absl::StrCat(home, "/.cache/tpuoff/jit");
  }
  return "";
}

std::string JitCacheName(std::string_view key) {
  return absl::StrFormat("%016x%016x", Fnv1a(key, 0xcbf29ce484222325ull),
                         Fnv1a(key, 0x84222325cbf29ce4ull));
}

std::optional<std::string> LoadJitObject(const std::string& dir, std::string_view key) {
  if (dir.empty()) return std::nullopt;
  const std::string path = absl::StrCat(dir, "/", JitCacheName(key), ".o");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::string data;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            st.st_size <= static_cast<off_t>(kMaxObjectBytes + kMagic.size() + key.size() + 64);
  if (ok) {
    data.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < data.size()) {
      const ssize_t n = read(fd, data.data() + got, data.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ok = got == data.size();
  }
  close(fd);
  if (!ok) return std::nullopt;
  std::string_view rest = data;
  if (rest.substr(0, kMagic.size()) != kMagic) return std::nullopt;
  rest.remove_prefix(kMagic.size());
  const std::optional<uint64_t> key_len = TakeNumber(&rest, '\n');
  if (!key_len || *key_len != key.size() || rest.substr(0, key.size()) != key) return std::nullopt;
  rest.remove_prefix(key.size());
  const std::optional<uint64_t> len = TakeNumber(&rest, ' ');
  const std::optional<uint64_t> hash = TakeNumber(&rest, '\n', 16);
  if (!len || !hash || *len != rest.size() || *hash != ObjectHash(rest)) return std::nullopt;
  return std::string(rest);
}

bool StoreJitObject(const std::string& dir, std::string_view key, std::string_view object) {
  if (dir.empty() || static_cast<int64_t>(object.size()) > kMaxObjectBytes ||
      !MakeDirectories(dir)) {
    return false;
  }
  const std::string name = JitCacheName(key);
  std::string tmp = absl::StrCat(dir, "/.", name, ".XXXXXX");
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return false;
  const bool ok = WriteAll(fd, Header(key, object)) && WriteAll(fd, object);
  const bool closed = close(fd) == 0;
  if (!ok || !closed || rename(tmp.c_str(), absl::StrCat(dir, "/", name, ".o").c_str()) != 0) {
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace tpuoff::runtime

#include "tools/io/file_names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tpuoff::tools {

std::string FileSafeName(const std::string& name) {
  std::string out;
  for (char c : std::string(absl::StripAsciiWhitespace(name))) {
    out.push_back(absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.' ? c : '_');
  }
  if (out.empty() || out[0] == '.') out.insert(out.begin(), '_');
  // Long names stay within file-name limits (255 bytes with ".npy").
  if (out.size() > 200) out.resize(200);
  return out;
}

std::vector<std::string> UniqueFileStems(const std::vector<std::string>& names,
                                         std::set<std::string> reserved) {
  std::vector<std::string> out;
  out.reserve(names.size());
  for (const std::string& name : names) {
    const std::string base = FileSafeName(name);
    std::string stem = base;
    for (int k = 1; reserved.count(stem) > 0; ++k) stem = absl::StrCat(base, "_", k);
    reserved.insert(stem);
    out.push_back(stem);
  }
  return out;
}

}  // namespace tpuoff::tools

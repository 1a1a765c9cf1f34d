#include "tools/io/json_text.h"

namespace tpuoff::tools {
namespace {

std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', /*ensure_ascii=*/false,
                nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

std::string JsonText(const nlohmann::ordered_json& j) { return Dump(j) + "\n"; }

std::string JsonRecords(const nlohmann::ordered_json& head, const std::string& key,
                        const std::vector<nlohmann::ordered_json>& records) {
  std::string out = "{";
  if (head.is_object() && !head.empty()) {
    const std::string fields = Dump(head);
    out.append(fields, 1, fields.size() - 2);  // without the braces
    out += ",";
  }
  out += Dump(key) + ":[\n";
  for (size_t i = 0; i < records.size(); ++i) {
    out += "  " + Dump(records[i]) + (i + 1 < records.size() ? ",\n" : "\n");
  }
  return out + "]}\n";
}

}  // namespace tpuoff::tools

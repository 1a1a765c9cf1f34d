// JSON documents the CLI writes (run's manifest, memory --json, bench --json,
// bench_xla.py's case manifests) are built as nlohmann::ordered_json, so keys
// keep the order they were added in, and serialised here.
#ifndef TPUOFF_TOOLS_IO_JSON_TEXT_H_
#define TPUOFF_TOOLS_IO_JSON_TEXT_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace tpuoff::tools {

// One line. Strings that are not valid UTF-8 (instruction and file names are
// bytes) are written with U+FFFD instead of throwing. Ends with a newline.
std::string JsonText(const nlohmann::ordered_json& j);

// `head`'s fields, then `key` holding `records`, one record per line:
//   {"header":"...","cases":[
//     {...},
//     {...}
//   ]}
// for documents that are one list of records (diffable, greppable).
std::string JsonRecords(const nlohmann::ordered_json& head, const std::string& key,
                        const std::vector<nlohmann::ordered_json>& records);

}  // namespace tpuoff::tools

#endif  // TPUOFF_TOOLS_IO_JSON_TEXT_H_

// A minimal JSON reader (RFC 8259 values) for small config files such as the
// test vectors' case.json. Not a general-purpose library: numbers are doubles,
// objects keep their members in file order, and errors name line:column.
#ifndef TPUOFF_HLO_JSON_H_
#define TPUOFF_HLO_JSON_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tpuoff::hlo {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  JsonValue() = default;  // null
  static JsonValue Bool(bool v);
  static JsonValue Number(double v);
  static JsonValue String(std::string v);
  static JsonValue Array(std::vector<JsonValue> v);
  static JsonValue Object(std::vector<std::pair<std::string, JsonValue>> v);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // Accessors for the matching kind (CHECK-free: a wrong kind yields the
  // zero value; callers check the kind first).
  bool bool_value() const { return bool_; }
  double number_value() const { return number_; }
  const std::string& string_value() const { return string_; }
  const std::vector<JsonValue>& array() const { return array_; }
  const std::vector<std::pair<std::string, JsonValue>>& members() const {
    return members_;
  }
  // The member named `key` of an object (the last one if repeated), or
  // nullptr when absent or not an object.
  const JsonValue* Find(absl::string_view key) const;

  // "null", "bool", "number", "string", "array", "object".
  static absl::string_view KindName(Kind kind);

 private:
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

// Parses one JSON document (surrounding whitespace allowed). Errors are
// InvalidArgument with "json:<line>:<col>: ..." (prefixed by `source` when
// given, e.g. a file name).
absl::StatusOr<JsonValue> ParseJson(absl::string_view text,
                                    absl::string_view source = "");

// Reads and parses a file; NotFound when it cannot be opened.
absl::StatusOr<JsonValue> ReadJsonFile(const std::string& path);

}  // namespace tpuoff::hlo

#endif  // TPUOFF_HLO_JSON_H_

// common/enum_names.h: an enum's names written once, as a table, for the
// project's programs (not part of the installed library).
//
//   constexpr EnumName<Topology> kTopologies[] = {
//       {Topology::kDirect, "direct"},
//       {Topology::kNamespace, "namespace"},
//   };
//   absl::string_view TopologyName(Topology t) { return NameOf(kTopologies, t); }
//   std::optional<Topology> t = ValueOf(kTopologies, "direct");
//   Values(kTopologies)                       // {kDirect, kNamespace}
//   NameList(kTopologies)                     // "direct, namespace"
//   NameList(kTopologies, ", ", " or ")       // "direct or namespace"
//   ParseName(kTopologies, "x", "topology")   // kInvalidArgument:
//                                             // unknown topology "x" (direct, namespace)
//
// The table's order is the order the names are listed in; a value missing
// from it is named by the fallback ("?" unless given).
//
// Header only; thread-safe (the tables are constant).

#ifndef REDLOCK_COMMON_ENUM_NAMES_H_
#define REDLOCK_COMMON_ENUM_NAMES_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace redlock {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `value` in `table`; `fallback` when the table lacks it.
template <typename E, size_t N>
constexpr absl::string_view NameOf(const EnumName<E> (&table)[N], E value,
                                   absl::string_view fallback = "?") {
  for (const EnumName<E>& e : table) {
    if (e.value == value) return e.name;
  }
  return fallback;
}

// The value named `name` (exactly); nullopt when none is.
template <typename E, size_t N>
std::optional<E> ValueOf(const EnumName<E> (&table)[N], absl::string_view name) {
  for (const EnumName<E>& e : table) {
    if (name == e.name) return e.value;
  }
  return std::nullopt;
}

// Every value in the table's order.
template <typename E, size_t N>
std::vector<E> Values(const EnumName<E> (&table)[N]) {
  std::vector<E> out;
  for (const EnumName<E>& e : table) out.push_back(e.value);
  return out;
}

// Every name in the table's order, `sep` between them and `last_sep`
// before the last one ("a, b or c").
template <typename E, size_t N>
std::string NameList(const EnumName<E> (&table)[N], absl::string_view sep = ", ",
                     absl::string_view last_sep = ", ") {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) absl::StrAppend(&out, i + 1 == N ? last_sep : sep);
    absl::StrAppend(&out, table[i].name);
  }
  return out;
}

// The value named `name`; otherwise kInvalidArgument naming `what` and
// every name: unknown topology "x" (direct, namespace).
template <typename E, size_t N>
absl::StatusOr<E> ParseName(const EnumName<E> (&table)[N], absl::string_view name,
                            absl::string_view what) {
  if (std::optional<E> value = ValueOf(table, name)) return *value;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", what, " \"", name, "\" (", NameList(table), ")"));
}

}  // namespace redlock

#endif  // REDLOCK_COMMON_ENUM_NAMES_H_

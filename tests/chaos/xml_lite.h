// tests/chaos/xml_lite.h: a small XML well-formedness checker and tree, for
// tests of the SVG the project writes (no XML library is a dependency).
//
// Accepts XML 1.0 documents made of an optional XML declaration, comments,
// processing instructions, elements, attributes (single or double quoted),
// character data, CDATA sections and the predefined and numeric character
// references. Rejects (kInvalidArgument, with the byte offset) what is not
// well-formed: unbalanced or mismatched tags, a duplicate attribute, an
// unquoted attribute, a bare '<' or '&', an unknown entity, text or a second
// element after the root. No DTD, no namespaces processing (prefixed names
// are plain names).
//
//   absl::StatusOr<xml_lite::Element> root = xml_lite::Parse(svg_text);
//   ASSERT_TRUE(root.ok()) << root.status();
//   int lanes = xml_lite::Count(*root, [](const xml_lite::Element& e) {
//     return e.name == "g" && xml_lite::HasClass(e, "lane");
//   });

#ifndef REDLOCK_TESTS_CHAOS_XML_LITE_H_
#define REDLOCK_TESTS_CHAOS_XML_LITE_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace redlock::xml_lite {

struct Element {
  std::string name;
  std::map<std::string, std::string> attributes;  // references resolved
  std::vector<Element> children;
  std::string text;  // the character data directly inside, concatenated

  // The attribute's value, or "" when absent.
  std::string Attribute(const std::string& key) const;
};

[[nodiscard]] absl::StatusOr<Element> Parse(absl::string_view document);

// True when the element's class attribute lists `cls` (space-separated).
bool HasClass(const Element& e, absl::string_view cls);

// The elements of the tree (the root included) for which `match` is true,
// in document order.
std::vector<const Element*> FindAll(const Element& root,
                                    const std::function<bool(const Element&)>& match);
int Count(const Element& root, const std::function<bool(const Element&)>& match);

}  // namespace redlock::xml_lite

#endif  // REDLOCK_TESTS_CHAOS_XML_LITE_H_

#include "tests/chaos/xml_lite.h"

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace redlock::xml_lite {
namespace {

bool NameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         static_cast<unsigned char>(c) >= 0x80;
}

bool NameChar(char c) { return NameStart(c) || (c >= '0' && c <= '9') || c == '-' || c == '.'; }

bool Space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class Parser {
 public:
  explicit Parser(absl::string_view doc) : doc_(doc) {}

  absl::StatusOr<Element> Document() {
    if (absl::StartsWith(doc_, "\xEF\xBB\xBF")) pos_ = 3;
    if (absl::StartsWith(doc_.substr(pos_), "<?xml")) {
      absl::Status s = SkipPast("?>");
      if (!s.ok()) return s;
    }
    absl::Status s = Misc();
    if (!s.ok()) return s;
    if (!Peek("<")) return Error("no root element");
    Element root;
    s = ParseElement(&root, 0);
    if (!s.ok()) return s;
    s = Misc();
    if (!s.ok()) return s;
    if (pos_ != doc_.size()) return Error("content after the root element");
    return root;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("XML not well-formed at byte ", pos_, ": ", what));
  }

  bool Peek(absl::string_view s) const { return absl::StartsWith(doc_.substr(pos_), s); }

  absl::Status SkipPast(absl::string_view end) {
    const size_t at = doc_.find(end, pos_);
    if (at == absl::string_view::npos) return Error(absl::StrCat("no closing ", end));
    pos_ = at + end.size();
    return absl::OkStatus();
  }

  // Comments, processing instructions and white space.
  absl::Status Misc() {
    for (;;) {
      while (pos_ < doc_.size() && Space(doc_[pos_])) ++pos_;
      if (Peek("<!--")) {
        absl::Status s = SkipPast("-->");
        if (!s.ok()) return s;
      } else if (Peek("<?")) {
        absl::Status s = SkipPast("?>");
        if (!s.ok()) return s;
      } else {
        return absl::OkStatus();
      }
    }
  }

  absl::StatusOr<std::string> Name() {
    const size_t begin = pos_;
    if (pos_ >= doc_.size() || !NameStart(doc_[pos_])) return Error("a name expected");
    while (pos_ < doc_.size() && NameChar(doc_[pos_])) ++pos_;
    return std::string(doc_.substr(begin, pos_ - begin));
  }

  // After '&': a reference, appended resolved.
  absl::Status Reference(std::string* out) {
    const size_t semi = doc_.find(';', pos_);
    if (semi == absl::string_view::npos || semi - pos_ > 12) return Error("bare '&'");
    const absl::string_view ref = doc_.substr(pos_, semi - pos_);
    if (ref == "amp") {
      out->push_back('&');
    } else if (ref == "lt") {
      out->push_back('<');
    } else if (ref == "gt") {
      out->push_back('>');
    } else if (ref == "quot") {
      out->push_back('"');
    } else if (ref == "apos") {
      out->push_back('\'');
    } else if (absl::StartsWith(ref, "#x")) {
      uint32_t cp = 0;
      if (!absl::SimpleHexAtoi(ref.substr(2), &cp) || cp == 0 || cp > 0x10FFFF) {
        return Error("bad character reference");
      }
      AppendUtf8(cp, out);
    } else if (absl::StartsWith(ref, "#")) {
      uint32_t cp = 0;
      if (!absl::SimpleAtoi(ref.substr(1), &cp) || cp == 0 || cp > 0x10FFFF) {
        return Error("bad character reference");
      }
      AppendUtf8(cp, out);
    } else {
      return Error(absl::StrCat("unknown entity &", ref, ";"));
    }
    pos_ = semi + 1;
    return absl::OkStatus();
  }

  absl::Status Attributes(Element* e) {
    for (;;) {
      const size_t before = pos_;
      while (pos_ < doc_.size() && Space(doc_[pos_])) ++pos_;
      if (Peek("/>") || Peek(">")) return absl::OkStatus();
      if (pos_ == before) return Error("space expected between attributes");
      absl::StatusOr<std::string> key = Name();
      if (!key.ok()) return key.status();
      while (pos_ < doc_.size() && Space(doc_[pos_])) ++pos_;
      if (!Peek("=")) return Error("'=' expected after an attribute name");
      ++pos_;
      while (pos_ < doc_.size() && Space(doc_[pos_])) ++pos_;
      if (pos_ >= doc_.size() || (doc_[pos_] != '"' && doc_[pos_] != '\'')) {
        return Error("attribute value not quoted");
      }
      const char quote = doc_[pos_++];
      std::string value;
      for (;;) {
        if (pos_ >= doc_.size()) return Error("unterminated attribute value");
        const char c = doc_[pos_];
        if (c == quote) break;
        if (c == '<') return Error("'<' in an attribute value");
        ++pos_;
        if (c == '&') {
          absl::Status s = Reference(&value);
          if (!s.ok()) return s;
        } else {
          value.push_back(c);
        }
      }
      ++pos_;
      if (!e->attributes.emplace(*key, std::move(value)).second) {
        return Error(absl::StrCat("duplicate attribute ", *key));
      }
    }
  }

  absl::Status ParseElement(Element* e, int depth) {
    if (depth > 256) return Error("nested too deep");
    ++pos_;  // '<'
    absl::StatusOr<std::string> name = Name();
    if (!name.ok()) return name.status();
    e->name = *name;
    absl::Status s = Attributes(e);
    if (!s.ok()) return s;
    if (Peek("/>")) {
      pos_ += 2;
      return absl::OkStatus();
    }
    ++pos_;  // '>'
    for (;;) {
      if (pos_ >= doc_.size()) return Error(absl::StrCat("<", e->name, "> never closed"));
      if (Peek("</")) {
        pos_ += 2;
        absl::StatusOr<std::string> end = Name();
        if (!end.ok()) return end.status();
        if (*end != e->name) {
          return Error(absl::StrCat("</", *end, "> closes <", e->name, ">"));
        }
        while (pos_ < doc_.size() && Space(doc_[pos_])) ++pos_;
        if (!Peek(">")) return Error("'>' expected");
        ++pos_;
        return absl::OkStatus();
      }
      if (Peek("<!--")) {
        s = SkipPast("-->");
      } else if (Peek("<![CDATA[")) {
        const size_t begin = pos_ + 9;
        s = SkipPast("]]>");
        if (s.ok()) absl::StrAppend(&e->text, doc_.substr(begin, pos_ - 3 - begin));
      } else if (Peek("<?")) {
        s = SkipPast("?>");
      } else if (Peek("<")) {
        Element child;
        s = ParseElement(&child, depth + 1);
        if (s.ok()) e->children.push_back(std::move(child));
      } else if (Peek("&")) {
        ++pos_;
        s = Reference(&e->text);
      } else {
        if (Peek("]]>")) return Error("']]>' in text");
        e->text.push_back(doc_[pos_++]);
      }
      if (!s.ok()) return s;
    }
  }

  absl::string_view doc_;
  size_t pos_ = 0;
};

void Collect(const Element& e, const std::function<bool(const Element&)>& match,
             std::vector<const Element*>* out) {
  if (match(e)) out->push_back(&e);
  for (const Element& c : e.children) Collect(c, match, out);
}

}  // namespace

std::string Element::Attribute(const std::string& key) const {
  auto it = attributes.find(key);
  return it == attributes.end() ? std::string() : it->second;
}

absl::StatusOr<Element> Parse(absl::string_view document) { return Parser(document).Document(); }

bool HasClass(const Element& e, absl::string_view cls) {
  for (absl::string_view c : absl::StrSplit(e.Attribute("class"), ' ', absl::SkipEmpty())) {
    if (c == cls) return true;
  }
  return false;
}

std::vector<const Element*> FindAll(const Element& root,
                                    const std::function<bool(const Element&)>& match) {
  std::vector<const Element*> out;
  Collect(root, match, &out);
  return out;
}

int Count(const Element& root, const std::function<bool(const Element&)>& match) {
  return static_cast<int>(FindAll(root, match).size());
}

}  // namespace redlock::xml_lite

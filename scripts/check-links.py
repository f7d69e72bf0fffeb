#!/usr/bin/env python3
"""Every relative link and anchor in the tree's Markdown files resolves.

  scripts/check-links.py [ROOT]          check every *.md under ROOT (default:
                                         the repository), exit 1 naming each
                                         broken link as FILE:LINE: TARGET: why
  scripts/check-links.py --check [ROOT]  first prove the checker fails: a
                                         throw-away tree with a missing file, a
                                         missing anchor and a missing
                                         directory must give three errors and
                                         exit 1; then check ROOT

What is checked: inline links and images [text](target), reference
definitions [name]: target, and <a href="target">. A target with a scheme
(https:, mailto:) is left alone. A path is relative to the file's directory
(or, starting with "/", to ROOT) and must exist; an anchor (#name, or
file.md#name) must be the GitHub id of a heading of that Markdown file (its
text lower-cased, punctuation dropped, spaces as "-", "-1", "-2" for
repeats) or an explicit <a name="..."> / id="..." in it. Links inside code
blocks and inline code are not links. Build directories (build*/), .git and
node_modules are skipped. Standard library only.
"""

import os
import re
import sys
import tempfile

import tree_check

SKIP_DIRS = {".git", "node_modules", "out"}
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HREF = re.compile(r"<a\s[^>]*href=\"([^\"]+)\"", re.I)
EXPLICIT_ID = re.compile(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"|\sid=\"([^\"]+)\"", re.I)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def markdown_files(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs
                         if x not in SKIP_DIRS and not (d == root and x.startswith("build")))
        for f in sorted(files):
            if f.endswith(".md"):
                yield os.path.join(d, f)


def lines_outside_code(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield n, line


def slug(heading):
    """GitHub's id for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchor_cache = {}


def anchors(path):
    if path not in _anchor_cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        ids, seen = set(), {}
        for _, line in lines_outside_code(text):
            m = HEADING.match(line)
            if m:
                s = slug(m.group(2))
                k = seen.get(s, 0)
                ids.add(s if k == 0 else "%s-%d" % (s, k))
                seen[s] = k + 1
            for m in EXPLICIT_ID.finditer(line):
                ids.add(m.group(1) or m.group(2))
        _anchor_cache[path] = ids
    return _anchor_cache[path]


def targets(text):
    for n, line in lines_outside_code(text):
        plain = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)
        for m in LINK.finditer(plain):
            yield n, m.group(1)
        m = REF_DEF.match(plain)
        if m:
            yield n, m.group(1)
        for m in HREF.finditer(plain):
            yield n, m.group(1)


def check_file(root, path):
    errors = []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    rel = os.path.relpath(path, root)
    for n, target in targets(text):
        if SCHEME.match(target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        if file_part:
            base = root if file_part.startswith("/") else os.path.dirname(path)
            dest = os.path.normpath(os.path.join(base, file_part.lstrip("/")))
            if not os.path.exists(dest):
                errors.append("%s:%d: %s: no such file or directory" % (rel, n, target))
                continue
        else:
            dest = path
        if anchor and dest.endswith(".md") and os.path.isfile(dest):
            if anchor not in anchors(dest):
                errors.append("%s:%d: %s: no heading or anchor '%s' in %s" %
                              (rel, n, target, anchor, os.path.relpath(dest, root)))
    return errors


def check_tree(root):
    errors, count = [], 0
    for path in markdown_files(root):
        count += 1
        errors += check_file(root, path)
    return count, errors


def self_test():
    """The checker must fail on each kind of broken link."""
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "docs"))
        with open(os.path.join(d, "docs", "page.md"), "w") as f:
            f.write("# A page\n\n## Its section\n")
        with open(os.path.join(d, "README.md"), "w") as f:
            f.write("# Top\n\n"
                    "[fine](docs/page.md#its-section) [fine too](#top)\n"
                    "`[not a link](nowhere.md)`\n"
                    "```\n[in code](nowhere.md)\n```\n"
                    "[missing file](docs/gone.md)\n"
                    "[missing anchor](docs/page.md#no-such-section)\n"
                    "[missing dir](guide/)\n")
        _, errors = check_tree(d)
        want = ["docs/gone.md", "docs/page.md#no-such-section", "guide/"]
        found = [w for w in want if any((": %s: " % w) in e for e in errors)]
        if len(errors) != 3 or found != want:
            print("check-links.py: the self-test expected 3 errors (%s), got:\n  %s" %
                  (", ".join(want), "\n  ".join(errors) or "none"), file=sys.stderr)
            return False
        print("check-links.py: self-test: a missing file, anchor and directory are reported")
        return True


def main(argv):
    return tree_check.run(
        argv, __doc__.strip().split("\n\n")[1], self_test, check_tree,
        lambda count, errors: "check-links.py: %d Markdown files, %d broken links" %
        (count, len(errors)))


if __name__ == "__main__":
    sys.exit(main(sys.argv))

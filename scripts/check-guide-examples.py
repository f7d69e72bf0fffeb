#!/usr/bin/env python3
"""Every C++ example of the guide is code the build compiles.

  scripts/check-guide-examples.py [--check] [ROOT]

Each ```cpp block of README.md and docs/guide/*.md must be found in one of
examples/guide/*.cc (which the build compiles against the public headers:
examples/guide/CMakeLists.txt), compared with all white space removed, so
that clang-format's line breaks do not matter. Exit 1 naming each example
that is not found (FILE:LINE and its first line). --check first proves it
fails: a throw-away tree whose page shows an example its .cc file lacks.
Standard library only.
"""

import glob
import os
import re
import sys
import tempfile

import tree_check

BLOCK = re.compile(r"^```cpp[^\n]*\n(.*?)^```", re.M | re.S)


def squash(text):
    return re.sub(r"\s+", "", text)


def check_tree(root):
    sources = ""
    for path in sorted(glob.glob(os.path.join(root, "examples", "**", "*.cc"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            sources += squash(f.read()) + "\n"
    pages = [os.path.join(root, "README.md")] + sorted(
        glob.glob(os.path.join(root, "docs", "guide", "*.md")))
    errors, count = [], 0
    for page in pages:
        if not os.path.exists(page):
            continue
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for m in BLOCK.finditer(text):
            count += 1
            if squash(m.group(1)) not in sources:
                line = text.count("\n", 0, m.start()) + 1
                first = m.group(1).strip().split("\n")[0]
                errors.append("%s:%d: example not in examples/guide/*.cc: %s" %
                              (os.path.relpath(page, root), line, first))
    return count, errors


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "docs", "guide"))
        os.makedirs(os.path.join(d, "examples", "guide"))
        with open(os.path.join(d, "examples", "guide", "a.cc"), "w") as f:
            f.write("void F() {\n  int x = 1;\n  (void)x;\n}\n")
        with open(os.path.join(d, "docs", "guide", "page.md"), "w") as f:
            f.write("# Page\n\n```cpp\nint x =\n    1;\n```\n\n```cpp\nint y = 2;\n```\n")
        _, errors = check_tree(d)
        if len(errors) != 1 or "int y = 2;" not in errors[0]:
            print("check-guide-examples.py: the self-test expected one missing example "
                  "(int y = 2;), got:\n  " + ("\n  ".join(errors) or "none"), file=sys.stderr)
            return False
        print("check-guide-examples.py: self-test: an example missing from the sources is reported")
        return True


def main(argv):
    return tree_check.run(
        argv, "usage: scripts/check-guide-examples.py [--check] [ROOT]", self_test, check_tree,
        lambda count, errors: "check-guide-examples.py: %d examples, %d not in examples/guide/" %
        (count, len(errors)))


if __name__ == "__main__":
    sys.exit(main(sys.argv))

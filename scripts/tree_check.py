"""The command line every tree check of scripts/ shares (check-links.py,
check-guide-examples.py): `[--check] [ROOT]`, ROOT the repository by
default; --check first runs the check's self-test (a throw-away tree it must
fail on); then the tree is checked, each error printed on stderr and a
summary on stdout. Standard library only.
"""

import os
import sys


def run(argv, usage, self_test, check_tree, summary):
    """Runs one tree check with the arguments `argv` (sys.argv).

    usage: the text printed (exit 2) on a bad argument; self_test(): True
    when the check fails as it must; check_tree(root): (count, errors);
    summary(count, errors): the last line. Returns the exit code: 1 when a
    self-test or the tree fails, else 0.
    """
    args = argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    if any(a.startswith("-") for a in args) or len(args) > 1:
        print(usage, file=sys.stderr)
        return 2
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    if check and not self_test():
        return 1
    count, errors = check_tree(root)
    for e in errors:
        print(e, file=sys.stderr)
    print(summary(count, errors))
    return 1 if errors else 0

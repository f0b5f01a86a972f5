#!/usr/bin/env python3
# scripts/check-imports.py - fails when the C files of one folder include each other in a circle.
"""Finds import circles between the C modules of each folder and exits 1 if there is any.

A module is the .c and .h files of one stem (bench_run.c + bench_run.h); a header named
<stem>_int.h or <stem>_internal.h is part of module <stem> (its private half). Module a imports
module b when a file of a has `#include "..."` naming a file of b in the same folder (the path is
tried beside the including file and from the repository root). A circle is a set of two or more
modules that reach each other through imports (a.c includes b.h and b.c includes a.h, or longer).
Folders compared one at a time; includes across folders are the layering rules' business (CMake).

Usage: scripts/check-imports.py [ROOT]     check the tree (default: the repository holding this file)
       scripts/check-imports.py --self-test  check that a planted circle is found and a clean tree passes
"""
import os
import re
import sys
import tempfile

# Folders not checked, with the reason. raft/ keeps its own internal header pair (issue 25 scopes
# the rule to everything outside raft/).
EXEMPT = {
    "raft": "raft/ is outside the rule (issue 25)",
}
SKIP_DIRS = {".git", "gen"}  # gen/ is generated from api/ and never edited

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(stem, stems):
    for suffix in ("_internal", "_int"):
        if stem.endswith(suffix) and stem[: -len(suffix)] in stems:
            return stem[: -len(suffix)]
    return stem


def folder_imports(root, rel, files):
    """Returns {module: {imported module: [(file, line number, include text)]}} for one folder."""
    folder = os.path.join(root, rel)
    stems = {os.path.splitext(f)[0] for f in files}
    names = set(files)
    imports = {}
    for f in sorted(files):
        src = module_of(os.path.splitext(f)[0], stems)
        with open(os.path.join(folder, f), errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = None
                for cand in (os.path.join(folder, m.group(1)), os.path.join(root, m.group(1))):
                    cand = os.path.normpath(cand)
                    if os.path.dirname(cand) == os.path.normpath(folder) and os.path.basename(cand) in names:
                        target = os.path.basename(cand)
                        break
                if target is None:
                    continue
                dst = module_of(os.path.splitext(target)[0], stems)
                if dst != src:
                    imports.setdefault(src, {}).setdefault(dst, []).append((f, n, m.group(1)))
    return imports


def circles(imports):
    """Strongly connected components of two or more modules (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(imports.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    nodes = set(imports) | {d for m in imports.values() for d in m}
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def check(root):
    """Prints every circle found under root; returns how many there are."""
    found = 0
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        dirnames[:] = sorted(
            d for d in dirnames
            if d not in SKIP_DIRS and not d.startswith("build")
            and (rel + "/" + d if rel != "." else d) not in EXEMPT)
        files = [f for f in filenames if f.endswith((".c", ".h"))]
        if not files:
            continue
        imports = folder_imports(root, dirpath if rel == "." else rel, files)
        for comp in circles(imports):
            found += 1
            print("import circle in %s/: %s" % (rel, " <-> ".join(comp)))
            for a in comp:
                for b in comp:
                    for f, n, text in imports.get(a, {}).get(b, []):
                        print("  %s/%s:%d includes \"%s\"" % (rel, f, n, text))
    return found


def self_test():
    def write(base, files):
        for path, text in files.items():
            full = os.path.join(base, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as fh:
                fh.write(text)

    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, "bad")
        write(bad, {
            "lib/a.h": "/* a */\n", "lib/a.c": '#include "a.h"\n#include "lib/b.h"\n',
            "lib/b.h": "/* b */\n", "lib/b.c": '#include "b.h"\n#include "c.h"\n',
            "lib/c.h": '#include "a.h"\n',
        })
        good = os.path.join(tmp, "good")
        write(good, {
            "lib/a.h": "/* a */\n", "lib/a_int.h": '#include "a.h"\n#include "b.h"\n',
            "lib/a.c": '#include "a_int.h"\n', "lib/b.h": "/* b */\n", "lib/b.c": '#include "b.h"\n',
            "raft/x.c": '#include "y.h"\n', "raft/x.h": "", "raft/y.c": '#include "x.h"\n',
            "raft/y.h": "",
        })
        print("self-test: planted circle a -> b -> c -> a:")
        if check(bad) != 1:
            print("self-test FAILED: the planted circle was not reported once")
            return 1
        if check(good) != 0:
            print("self-test FAILED: a clean tree (private header, exempt raft/) reported a circle")
            return 1
    print("self-test: ok")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    n = check(os.path.abspath(root))
    if n:
        print("%d import circle(s): make the imports run one way (register a callback, or move the "
              "shared declarations to a header both include)" % n)
        return 1
    print("no import circles outside %s" % ", ".join(sorted(EXEMPT)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

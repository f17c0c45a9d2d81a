#!/usr/bin/env python3
"""The subsystem folders' layering (docs/design.md §12, "Subsystem folders").

Each folder agent/<f>/ builds the library agent_<f>, and its CMakeLists.txt
names the libraries it may use (target_link_libraries). The linker already
refuses a call into a folder that is not below; this check refuses the
includes too (a header's inline code needs no link), so that every
`#include "agent/<g>/..."` in agent/<f>/ names <f> itself or a folder <f>
may use, directly or through the folders it uses. common/ never includes
agent/. The store's keys are the repository's own (docs/design.md §4, "The
repository"): agent/repo/store_layout.h, where every key is built, is
included by agent/repo/ alone. Exits 1 and names every include that breaks
a rule.
Usage: source_layers.py REPO_ROOT
"""
import pathlib
import re
import sys


def allowed_uses(root):
    """folder -> the folders its library may use (transitively)."""
    direct = {}
    for cmake in sorted((root / "agent").glob("*/CMakeLists.txt")):
        folder = cmake.parent.name
        text = cmake.read_text()
        uses = set()
        for m in re.finditer(r"target_link_libraries\(\s*agent_%s\b([^)]*)\)" % folder, text):
            uses |= set(re.findall(r"\bagent_(\w+)", m.group(1)))
        direct[folder] = uses
    closure = {}

    def reach(f, seen):
        for g in direct.get(f, ()):
            if g not in seen:
                seen.add(g)
                reach(g, seen)
        return seen

    for f in direct:
        closure[f] = reach(f, set())
    return closure


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    uses = allowed_uses(root)
    problems = []
    if not uses:
        problems.append("no agent/<folder>/CMakeLists.txt found")
    for path in sorted((root / "agent").rglob("*")):
        if path.suffix not in (".cc", ".h"):
            continue
        rel = path.relative_to(root)
        if len(rel.parts) != 3:
            problems.append(f"{rel}: product code lives in a subsystem folder, agent/<folder>/")
            continue
        folder = rel.parts[1]
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"agent/(\w+)/', line)
            if folder != "repo" and re.match(r'\s*#\s*include\s+"agent/repo/store_layout\.h"', line):
                problems.append(f"{rel}:{n}: only agent/repo/ builds store keys: ask the "
                                "repository (agent/repo/repository.h), not store_layout.h")
            if m and m.group(1) != folder and m.group(1) not in uses.get(folder, set()):
                problems.append(f"{rel}:{n}: agent/{folder} may not use agent/{m.group(1)} "
                                f"(it may use: {', '.join(sorted(uses.get(folder, ()))) or 'none'})")
    for path in sorted((root / "common").rglob("*")):
        if path.suffix in (".cc", ".h") and re.search(r'#\s*include\s+"agent/', path.read_text()):
            problems.append(f"{path.relative_to(root)}: common/ never includes agent/")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problems (docs/design.md §12, \"Subsystem folders\")")
        return 1
    print(f"every include follows the layers of {len(uses)} folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())

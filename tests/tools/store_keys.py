#!/usr/bin/env python3
"""No store key is built outside the repository (docs/design.md §4, "The
repository").

Every key of a job's prefix is spelled in agent/repo/store_layout.cc and
nowhere else: the rest of the product asks the repository
(agent/repo/repository.h) for what it needs. This check reads the code of
agent/ and common/ (comments and #include lines left out) and refuses any
string literal that spells a part of a key: one of the store's folders
followed by '/' ("snapshots/", "group/", "nodes/", ...), one of its record
names ("manifest.json", "plan.json", ...), or a record name joined to a
prefix with '+' ("lease", "latest", "complete", "claim"). source_layers.py
checks the other half: that only agent/repo/ includes store_layout.h.
Exits 1 and names every literal it refuses.
Usage: store_keys.py REPO_ROOT
"""
import pathlib
import re
import sys

# Where keys are built: the one file, and its header's description of them.
OWNER = {"agent/repo/store_layout.cc", "agent/repo/store_layout.h"}

FOLDERS = ("snapshots", "group", "groups", "nodes", "fences", "quarantine", "events", "logs",
           "rounds", "members", "parts", "packs", "files", "suspect", "refused", r"\.doctor",
           "end", "done", "asked", "flush")
FOLDER = re.compile(r'"[^"\n]*(?<![\w.-])(?:%s)/[^"\n]*"' % "|".join(FOLDERS))
RECORD = re.compile(r'"[^"\n]*\b(?:manifest|plan|final|suspect|failed)\.json"')
JOINED = re.compile(r'\+\s*"/?(?:lease|latest|complete|claim)"|"/?(?:lease|latest|complete|claim)"\s*\+')
# Not the store's: the metadata service's paths (agent/run/interruption_monitor.h).
NOT_KEYS = re.compile(r'"[^"\n]*meta-data/[^"\n]*"')
LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def code_of(line):
    """The line without a // comment (string literals kept whole)."""
    out, i = [], 0
    while i < len(line):
        if line.startswith("//", i):
            break
        if line[i] == '"':
            m = LITERAL.match(line, i)
            if m:
                out.append(m.group(0))
                i = m.end()
                continue
        out.append(line[i])
        i += 1
    return "".join(out)


def problems_in(root):
    problems = []
    for top in ("agent", "common"):
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in (".cc", ".h"):
                continue
            rel = path.relative_to(root).as_posix()
            if rel in OWNER:
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.match(r"\s*#\s*include\b", line):
                    continue
                code = NOT_KEYS.sub('""', code_of(line))
                for rule in (FOLDER, RECORD, JOINED):
                    m = rule.search(code)
                    if m:
                        problems.append(f"{rel}:{n}: {m.group(0).strip()}: a store key built "
                                        "outside the repository (agent/repo/repository.h)")
                        break
    return problems


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    problems = problems_in(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} store keys built outside agent/repo/store_layout.cc "
              "(docs/design.md §4, \"The repository\")")
        return 1
    print("every store key is built by the repository (agent/repo/store_layout.cc)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

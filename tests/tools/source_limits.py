#!/usr/bin/env python3
"""The size rules of the product code (docs/design.md, "Code layout"): no
source file over 400 lines and no function over 80 lines, in agent/ and
common/. Exits 1 and names every file and function that breaks one.

Functions are found by a brace scan with strings, characters and comments
blanked out: a `{` at namespace or class level whose declaration holds a
parameter list opens a function, and the function runs to its matching `}`.
Usage: source_limits.py REPO_ROOT
"""
import pathlib
import re
import sys

MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80


def blank_literals(text):
    """The text with comments, string and char literals replaced by spaces
    (newlines kept, so line numbers hold)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(text):
    """(first line, lines, signature) of each function over the limit."""
    code = blank_literals(text)
    stack = []  # kinds of the open braces: ns, class, func, other
    decl_start = 0  # where the current declaration began (offset)
    found = []
    for i, c in enumerate(code):
        if c == "{":
            inside_func = any(k[0] in ("func", "other") for k in stack)
            kind = "other"
            if not inside_func:
                decl = code[decl_start:i].strip()
                if re.match(r"(inline\s+)?namespace\b|extern\s", decl):
                    kind = "ns"
                elif re.search(r"\b(class|struct|union|enum)\b[^()]*$", decl):
                    kind = "class"
                elif "(" in decl and "=" not in decl.split("(")[0]:
                    kind = "func"
                if kind == "func":
                    first = code.count("\n", 0, decl_start + (len(code[decl_start:i]) - len(code[decl_start:i].lstrip())))
                    stack.append(("func", first + 1, decl.splitlines()[0][:80] if decl else ""))
                    continue
            stack.append((kind, 0, ""))
        elif c == "}":
            if stack:
                kind, first, sig = stack.pop()
                if kind == "func":
                    last = code.count("\n", 0, i) + 1
                    if last - first + 1 > MAX_FUNCTION_LINES:
                        found.append((first, last - first + 1, sig))
            if not any(k[0] in ("func", "other") for k in stack):
                decl_start = i + 1
        elif c in ";" and not any(k[0] in ("func", "other") for k in stack):
            decl_start = i + 1
        elif c == ":" and not any(k[0] in ("func", "other") for k in stack):
            # access specifiers ("public:") end a declaration too
            if re.search(r"\b(public|private|protected)\s*$", code[decl_start:i]):
                decl_start = i + 1
    return found


def strip_preprocessor(text):
    return re.sub(r"(?m)^[ \t]*#.*$", lambda m: " " * len(m.group(0)), text)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    problems = []
    for folder in ("agent", "common"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".cc", ".h"):
                continue
            text = path.read_text()
            rel = path.relative_to(root)
            lines = text.count("\n")
            if lines > MAX_FILE_LINES:
                problems.append(f"{rel}: {lines} lines (at most {MAX_FILE_LINES})")
            for first, length, sig in long_functions(strip_preprocessor(text)):
                problems.append(f"{rel}:{first}: a function of {length} lines "
                                f"(at most {MAX_FUNCTION_LINES}): {sig}")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problems; split them (docs/design.md, \"Code layout\")")
        return 1
    print("every file and function within its size")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Checks a Dockerfile that adds spotguard to a training image, and writes
its shell steps out for ShellCheck (hadolint, which would do this, is not a
Debian 12 package).

The contract (docs/fleet.md, "The image"): the base image comes from an ARG;
the ENTRYPOINT is spotguard in exec form, so that spotguard itself is the
container's PID 1 (the shell form would make /bin/sh PID 1, which neither
forwards SIGTERM nor reaps); the config file it names is COPYed into the
image; the CMD (the trainer) is in exec form.

Each shell-form RUN becomes OUT_DIR/run-LINE.sh, run by the shell the
Dockerfile's SHELL names (/bin/sh by default), with the Dockerfile's ARG and
ENV names exported at its top so that ShellCheck knows them.

    dockerfile_check.py DOCKERFILE OUT_DIR
Exit 0 when the contract holds, 1 with every problem listed.
"""
import json
import pathlib
import re
import sys


def instructions(text):
    """(line number, INSTRUCTION, arguments) with continuations joined and
    comment lines inside a continuation dropped, as Docker reads them."""
    out, buf, start = [], [], 0
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue
        if not buf:
            start = n
        if line.rstrip().endswith("\\"):
            # Kept as a shell line continuation: the shell joins the lines
            # as Docker does.
            buf.append(line.rstrip())
            continue
        buf.append(line)
        joined = "\n".join(buf).strip()
        buf = []
        word, _, rest = joined.partition(" ")
        out.append((start, word.upper(), rest.strip()))
    if buf:
        out.append((start, "UNTERMINATED", ""))
    return out


def exec_form(args):
    try:
        value = json.loads(args)
    except ValueError:
        return None
    return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def main():
    dockerfile, out_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    steps = instructions(dockerfile.read_text())
    problems = []
    shell = "/bin/sh"
    names = []
    copies = []
    runs = 0
    seen_from = False
    entrypoint = cmd = None
    for line, word, args in steps:
        if word == "UNTERMINATED":
            problems.append(f"line {line}: the instruction ends in a continuation")
        elif word == "ARG":
            names.append(args.split("=")[0].strip())
        elif word == "ENV":
            names.extend(re.findall(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=", args) or args.split()[:1])
        elif word == "FROM":
            if not re.match(r"^\$\{?[A-Za-z_][A-Za-z0-9_]*\}?(\s|$)", args):
                problems.append(f"line {line}: FROM {args}: the base image is not an ARG")
            seen_from = True
        elif word == "SHELL":
            form = exec_form(args)
            if not form:
                problems.append(f"line {line}: SHELL is not in exec form")
            else:
                shell = form[0]
        elif word == "COPY" or word == "ADD":
            parts = args.split()
            copies.append(parts[-1] if parts else "")
        elif word == "RUN":
            if exec_form(args) is not None:
                continue  # no shell runs it
            if re.search(r"<<-?\s*['\"]?[A-Za-z_]", args):
                problems.append(f"line {line}: a heredoc RUN; write it as a script file instead")
                continue
            runs += 1
            exports = "".join(f'export {n}="${{{n}:-}}"\n' for n in dict.fromkeys(names))
            (out_dir / f"run-{line}.sh").write_text(
                f"#!{shell}\n# {dockerfile.name} line {line}\n{exports}{args}\n")
        elif word == "ENTRYPOINT":
            entrypoint = (line, args)
        elif word == "CMD":
            cmd = (line, args)
    if not seen_from:
        problems.append("no FROM")
    if entrypoint is None:
        problems.append("no ENTRYPOINT: spotguard must be the container's first process")
    else:
        line, args = entrypoint
        form = exec_form(args)
        if form is None:
            problems.append(f"line {line}: ENTRYPOINT {args} is in shell form: /bin/sh would be PID 1, "
                            "not spotguard (write it as a JSON array)")
        elif len(form) < 5 or form[:3] != ["spotguard", "run", "-c"] or form[-1] != "--":
            problems.append(f"line {line}: ENTRYPOINT {form} is not [\"spotguard\", \"run\", \"-c\", FILE, \"--\"]")
        else:
            config = form[3]
            if not any(c == config or (c.endswith("/") and config.startswith(c)) for c in copies):
                problems.append(f"line {line}: the config {config} is not COPYed into the image")
    if cmd is None or exec_form(cmd[1]) is None:
        problems.append("the CMD (the trainer) is missing or not in exec form")
    if runs == 0:
        problems.append("no shell-form RUN step: nothing installs spotguard")
    if problems:
        print(f"{dockerfile}: {len(problems)} problem(s):\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"{dockerfile}: spotguard is the exec-form ENTRYPOINT; {runs} RUN step(s) written to {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

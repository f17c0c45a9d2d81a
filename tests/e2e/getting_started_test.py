#!/usr/bin/env python3
"""Runs every command of docs/getting-started.md and checks what it prints.

The page is read as a script: in each ```console block, a line starting
with "$ " is a command (a trailing backslash continues it), and the lines
after it, up to the next command, are what it prints. A ```json block right
after a line <!-- file: PATH --> is written to PATH. Commands run in order in
one shell state (exports and the working directory carry over), from the
source dir, with stdout and stderr together as a terminal shows them:

  * a command must exit 0, and print its lines: each line on the page, in
    order, is one of its output lines (others may come between), where a run
    of digits stands for any number, a hex id for any hex id, "..." for
    anything, and runs of spaces for any spaces; a command shown without
    output must print nothing;
  * the machine is a sandbox: /etc/, /data/, /opt/, /usr/bin/spotguard and
    /var/log/spotguard are placed under a temporary root, s3://my-bucket/spotguard
    is a fresh prefix of the test gateway's bucket, the metadata service is the
    IMDS simulator (tests/tools/imds_sim.py) serving the gateway's keys as the
    instance role's, and build/quickstart/agent/spotguard is the binary under
    test; the output is mapped back before it is compared;
  * `sudo` runs its command (the test runs as root); `systemctl` is a stand-in
    (systemd cannot run here) that does what systemd does with the unit:
    `enable --now` starts the unit's ExecStart with %i expanded, in the
    background with LOGS_DIRECTORY and STATE_DIRECTORY set, `stop` sends
    SIGTERM to it and waits for its exit, which must be one the unit counts
    as success (0 or SuccessExitStatus); `systemd-analyze verify` is the real
    one, run with --root on the sandbox (holding a copy of the system's units).

Before a command that reads the job's state while the agent runs, the test
waits until the first snapshot is committed (a deadline of 180 s only catches
a hang), so the page's output does not depend on timing.

    getting_started_test.py SPOTGUARD_BINARY [--show]
--show prints each command's mapped output, to update the page from.
Needs the SPOTGUARD_TEST_S3_* variables (scripts/s3-server.sh).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(SRC, "docs", "getting-started.md")
DOC_KEY, DOC_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def parse(page):
    """The page's steps: ("file", path, text) and ("cmd", command, expected lines)."""
    steps, lines, i = [], open(page).read().split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("<!-- file: ") and lines[i + 1].startswith("```"):
            path = line[len("<!-- file: "):].rstrip(" ->")
            end = lines.index("```", i + 2)
            steps.append(("file", path, "\n".join(lines[i + 2:end]) + "\n"))
            i = end + 1
        elif line == "```console":
            end = lines.index("```", i + 1)
            j = i + 1
            while j < end:
                assert lines[j].startswith("$ "), f"{page}:{j + 1}: output before any command"
                command = lines[j][2:]
                while command.endswith("\\"):
                    j += 1
                    command = command[:-1] + "\n" + lines[j]
                j += 1
                expected = []
                while j < end and not lines[j].startswith("$ "):
                    expected.append(lines[j])
                    j += 1
                steps.append(("cmd", command, expected))
            i = end + 1
        else:
            i += 1
    return steps


def pattern(line):
    """A page line as a regex over an output line."""
    out = ""
    for token in re.split(r"(\.\.\.|\s+|[0-9a-f]*\d[0-9a-f]*)", line.strip()):
        if token == "...":
            out += ".*"
        elif token and token.isspace():
            out += r"\s+"
        elif token and re.fullmatch(r"[0-9a-f]*\d[0-9a-f]*", token):
            out += r"[0-9a-f]+" if re.search("[a-f]", token) or len(token) >= 8 else r"\d+"
        else:
            out += re.escape(token)
    return re.compile(out)


def check_output(command, expected, actual):
    wanted = [e for e in expected if e.strip() and e.strip() != "..."]  # "..." alone: lines left out
    got = [a.rstrip() for a in actual.split("\n") if a.strip()]
    if not wanted:
        if got:
            raise AssertionError(f"`{command}` printed what the page does not show:\n{actual}")
        return
    k = 0
    for line in wanted:
        regex = pattern(line)
        while k < len(got) and not regex.fullmatch(got[k].strip()):
            k += 1
        if k == len(got):
            raise AssertionError(f"`{command}`: the page's line\n  {line}\nis not in its output "
                                 f"(in this order):\n{actual}")
        k += 1


class Sandbox:
    def __init__(self, binary):
        self.root = tempfile.mkdtemp(prefix="getting-started-")
        self.bucket = os.environ["SPOTGUARD_TEST_S3_BUCKET"]
        self.prefix = "getting-started-" + uuid.uuid4().hex[:8]
        self.binary = binary
        self.key = os.environ["SPOTGUARD_TEST_S3_ACCESS_KEY"]
        self.secret = os.environ["SPOTGUARD_TEST_S3_SECRET_KEY"]
        self.imds = self.start_imds()
        self.forward = [  # page -> sandbox, in one pass
            ("s3://my-bucket/spotguard", f"s3://{self.bucket}/{self.prefix}"),
            ("build/quickstart/agent/spotguard", binary),
            ("/usr/bin/spotguard", self.root + "/usr/bin/spotguard"),
            ("/var/log/spotguard", self.root + "/var/log/spotguard"),
            ("/etc/", self.root + "/etc/"), ("/data/", self.root + "/data/"),
            ("/opt/", self.root + "/opt/"),
            (DOC_KEY, self.key), (DOC_SECRET, self.secret)]
        self.back = [(self.root, ""), (f"{self.bucket}/{self.prefix}", "my-bucket/spotguard"),
                     (self.imds, "http://169.254.169.254"), ("****" + self.key[-4:], "****" + DOC_KEY[-4:])]
        for d in ("usr/bin", "etc/systemd/system", "opt", "var/log", "data"):  # as on the instance
            os.makedirs(os.path.join(self.root, d))
        bin_dir = os.path.join(self.root, "sbin-test")
        os.makedirs(bin_dir)
        shutil.copytree("/usr/lib/systemd/system", self.root + "/usr/lib/systemd/system", symlinks=True)
        os.symlink(os.path.join(SRC, "tests", "e2e", "getting_started_systemctl.sh"),
                   os.path.join(bin_dir, "systemctl"))
        os.symlink("/usr/bin/python3", os.path.join(bin_dir, "python3"))  # torch is there
        self.write(os.path.join(bin_dir, "sudo"), '#!/bin/sh\nexec "$@"\n', 0o755)
        self.write(os.path.join(bin_dir, "systemd-analyze"),
                   '#!/bin/sh\n[ "$1" = verify ] || exit 2\nshift\n'
                   'exec /usr/bin/systemd-analyze verify --root="$SANDBOX" "${@#"$SANDBOX"}"\n', 0o755)
        self.env = {"PATH": f"{bin_dir}:{self.root}/usr/bin:/usr/bin:/bin", "HOME": self.root + "/root",
                    "LANG": "C.UTF-8", "SANDBOX": self.root, "SPOTGUARD_IMDS_ENDPOINT": self.imds,
                    "SPOTGUARD_ENDPOINT": os.environ["SPOTGUARD_TEST_S3_ENDPOINT"],
                    "AWS_REGION": os.environ.get("SPOTGUARD_TEST_S3_REGION", "us-east-1"),
                    "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", ""),
                    "UBSAN_OPTIONS": os.environ.get("UBSAN_OPTIONS", "")}
        os.makedirs(self.env["HOME"])

    @staticmethod
    def write(path, text, mode=0o644):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)

    def start_imds(self):
        port_file = os.path.join(self.root, "imds.port")
        self.imds_proc = subprocess.Popen(
            [sys.executable, os.path.join(SRC, "tests", "tools", "imds_sim.py"), "--port", "0",
             "--port-file", port_file], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30  # only catches a hang
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if time.monotonic() > deadline:
                raise AssertionError("the IMDS simulator did not start")
            time.sleep(0.05)
        endpoint = f"http://127.0.0.1:{open(port_file).read().strip()}"
        body = json.dumps({"role": "spotguard-role", "AccessKeyId": self.key,
                           "SecretAccessKey": self.secret}).encode()
        no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        no_proxy.open(urllib.request.Request(endpoint + "/_sim/credentials", data=body, method="POST"),
                      timeout=10).read()
        return endpoint

    def map(self, text, pairs):
        regex = re.compile("|".join(re.escape(a) for a, _ in pairs))
        table = dict(pairs)
        return regex.sub(lambda m: table[m.group(0)], text)

    def run(self, command):
        """Runs `command` in the carried shell state; returns (exit code, mapped output)."""
        state = os.path.join(self.root, "shell-state")
        script = (f"cd {SRC}\n[ -f {state} ] && . {state}\n{self.map(command, self.forward)}\n"
                  f"rc=$?\n{{ export -p; echo \"cd '$PWD'\"; }} > {state}\nexit $rc\n")
        r = subprocess.run(["bash", "-c", script], env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=600)
        return r.returncode, self.map(r.stdout, self.back)

    def wait_for_a_snapshot(self, config):
        deadline = time.monotonic() + 180  # only catches a hang
        while True:
            r = subprocess.run([self.binary, "ls", "-c", self.map(config, self.forward)], env=self.env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            if r.returncode == 0 and re.search(r"^\s*0*1\s", r.stdout, re.M):
                return
            if time.monotonic() > deadline:
                journal = os.path.join(self.root, "run", "stand-in-systemd")
                logs = "".join(open(os.path.join(journal, n)).read()[-4000:]
                               for n in os.listdir(journal) if n.endswith(".journal"))
                raise AssertionError(f"no snapshot committed within 180 s: {r.stdout}\nthe agent:\n{logs}")
            time.sleep(1)

    def close(self):
        subprocess.run([os.path.join(SRC, "tests", "e2e", "getting_started_systemctl.sh"), "kill-all"],
                       env=self.env)
        self.imds_proc.kill()
        self.imds_proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def main():
    binary, show = os.path.abspath(sys.argv[1]), "--show" in sys.argv[2:]
    steps = parse(PAGE)
    commands = [s for s in steps if s[0] == "cmd"]
    assert len(commands) >= 10, f"only {len(commands)} commands found in {PAGE}"
    box = Sandbox(binary)
    running = False
    try:
        for kind, what, detail in steps:
            if kind == "file":
                Sandbox.write(box.map(what, box.forward), box.map(detail, box.forward))
                continue
            config = re.search(r"-c (\S+\.json)", what)
            if running and config and what.startswith("spotguard "):
                box.wait_for_a_snapshot(config.group(1))
            rc, out = box.run(what)
            if show:
                print(f"$ {what}\n{out}", end="" if out.endswith("\n") or not out else "\n")
            if rc != 0:
                raise AssertionError(f"`{what}` exited {rc}:\n{out}")
            if not show:
                check_output(what, detail, out)
            running = (running or "enable --now" in what) and "systemctl stop" not in what
    finally:
        box.close()
    print(f"getting_started: {len(commands)} commands of docs/getting-started.md run, their output as shown")


if __name__ == "__main__":
    main()

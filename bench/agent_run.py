"""Helpers of the bench drivers that run the agent (`spotguard run`): an IMDS
simulator of its own per agent, and the time of an agent's log line."""
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z ")


def stamp_of(line):
    """The UTC time at the start of an agent's log line, or None."""
    m = STAMP.match(line)
    if not m:
        return None
    return datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=timezone.utc).timestamp()


def start_tool(work, script, name, args=()):
    """Starts tests/tools/<script> with --port-file on a free port; returns
    (process, endpoint)."""
    port_file = os.path.join(work, name + ".port")
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests/tools", script),
                          *args, "--port-file", port_file],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        if os.path.exists(port_file) and open(port_file).read().strip():
            return p, "http://127.0.0.1:" + open(port_file).read().strip()
        time.sleep(0.05)
    p.kill()
    raise RuntimeError(f"{script} did not start")


def start_imds(work, name="imds"):
    """Starts tests/tools/imds_sim.py on a free port; returns (process, endpoint)."""
    return start_tool(work, "imds_sim.py", name)

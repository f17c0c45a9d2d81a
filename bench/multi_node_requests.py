#!/usr/bin/env python3
"""Counts the S3 requests of a multi-node group's protocol, per node and
minute (docs/multi-node.md, "Cost in S3 requests").

Two agents of one job with the default group and lease timings, each
reaching the store through its own fault proxy (tests/tools/fault_proxy.py,
no faults), which logs every request. The trainer saves nothing, so what is
counted is the protocol alone: member records, the round's records, the
lease. After the first round starts, the requests of --seconds are sorted
by kind and printed per node, the coordinator (lease holder) named.

Uses the gateway of SPOTGUARD_TEST_S3_* (scripts/s3-server.sh) or of
bench/gateway.sh.
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_run import ROOT, start_imds, start_tool  # noqa: E402


def stats(endpoint):
    with urllib.request.urlopen(endpoint + "/_proxy/stats", timeout=10) as r:
        return json.loads(r.read())


KINDS = [
    ("member record", r"^PUT .*/group/members/"),
    ("list members", r"^GET .*list-type=2.*prefix=[^&]*group%2Fmembers"),
    ("list a round's ends", r"^GET .*list-type=2.*prefix=[^&]*%2Fend%2F"),
    ("list a round's parts", r"^GET .*list-type=2.*prefix=[^&]*%2Fparts%2F"),
    ("list a round's done", r"^GET .*list-type=2.*prefix=[^&]*%2Fdone%2F"),
    ("list a round's asks", r"^GET .*list-type=2.*prefix=[^&]*%2Fasked%2F"),
    ("list group snapshots", r"^GET .*list-type=2.*prefix=[^&]*groups%2F"),
    ("list rounds (plans)", r"^GET .*list-type=2.*prefix=[^&]*group%2Frounds%2F(&|$)"),
    ("lease", r"/lease"),
    ("read refused/failed", r"^(GET|HEAD) .*/group/(refused|failed)"),
    ("read a plan", r"^GET .*/plan\.json"),
    ("read final", r"^GET .*/final\.json"),
    ("other LIST", r"^GET .*list-type=2"),
]


def kind_of(line):
    for name, pattern in KINDS:
        if re.search(pattern, line):
            return name
    return line.split(" ")[0] + " (other)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sg", default=os.path.join(ROOT, "build/release/agent/spotguard"))
    ap.add_argument("--seconds", type=int, default=60)
    args = ap.parse_args()
    endpoint = os.environ["SPOTGUARD_TEST_S3_ENDPOINT"]
    bucket = os.environ["SPOTGUARD_TEST_S3_BUCKET"]
    upstream = endpoint.split("://", 1)[1].rstrip("/")
    env = dict(os.environ)
    env.pop("AWS_EC2_METADATA_DISABLED", None)
    env["AWS_ACCESS_KEY_ID"] = os.environ["SPOTGUARD_TEST_S3_ACCESS_KEY"]
    env["AWS_SECRET_ACCESS_KEY"] = os.environ["SPOTGUARD_TEST_S3_SECRET_KEY"]
    env["SPOTGUARD_CONFIG"] = ""
    work = tempfile.mkdtemp(prefix="sg-requests-")
    prefix = "bench-requests/" + os.path.basename(work)
    procs, agents, proxies = [], {}, {}
    try:
        for n in (1, 2):
            proxy, proxy_endpoint = start_tool(work, "fault_proxy.py", f"proxy{n}",
                                               ("--upstream", upstream))
            procs.append(proxy)
            proxies[n] = proxy_endpoint
            imds, imds_endpoint = start_imds(work, f"imds{n}")
            procs.append(imds)
            urllib.request.urlopen(urllib.request.Request(
                imds_endpoint + "/_sim/identity",
                data=json.dumps({"instanceId": f"i-node{n}"}).encode(), method="POST"))
            ckpt = os.path.join(work, f"node{n}", "ckpt")
            os.makedirs(ckpt)
            cfg = {"job": "job", "store": f"s3://{bucket}/{prefix}", "endpoint": proxy_endpoint,
                   "checkpoint_dir": ckpt, "nodes": 2, "preset": "pytorch",
                   "group": {"address": "127.0.0.1"},
                   "imds": {"endpoint": imds_endpoint},
                   "command": [sys.executable, os.path.join(ROOT, "tests/tools/group_trainer.py"),
                               "--steps", "100000000", "--save-every", "100000000",
                               "--step-seconds", "0.5"]}
            path = os.path.join(work, f"n{n}.json")
            with open(path, "w") as f:
                json.dump(cfg, f)
            log = open(os.path.join(work, f"n{n}.log"), "w")
            agents[n] = subprocess.Popen([args.sg, "run", "-c", path], stdout=log,
                                         stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 120
        while time.time() < deadline:
            if all("round 1: rank" in open(os.path.join(work, f"n{n}.log")).read() for n in (1, 2)):
                break
            time.sleep(0.5)
        else:
            raise RuntimeError("round 1 did not start within 120 s")
        seen = {n: stats(proxies[n])["requests"] for n in (1, 2)}
        lines = {n: [] for n in (1, 2)}
        end = time.time() + args.seconds
        while time.time() < end:
            time.sleep(min(5, max(0.1, end - time.time())))
            for n in (1, 2):
                s = stats(proxies[n])
                new = s["requests"] - seen[n]
                if new > len(s["log"]):
                    raise RuntimeError("more requests than the proxy's log holds; poll faster")
                if new:
                    lines[n].extend(s["log"][-new:])
                seen[n] = s["requests"]
        for n in (1, 2):
            text = open(os.path.join(work, f"n{n}.log")).read()
            role = "coordinator" if re.search(r"coordinating job|took the lease", text) else "member"
            counts = collections.Counter(kind_of(line) for line in lines[n])
            per_minute = 60.0 / args.seconds
            total = sum(counts.values())
            print(f"node {n} ({role}): {total * per_minute:.0f} requests a minute")
            for kind, count in counts.most_common():
                print(f"  {kind:24s} {count * per_minute:6.1f}")
    finally:
        for a in agents.values():
            a.terminate()
        for a in agents.values():
            try:
                a.wait(timeout=60)
            except subprocess.TimeoutExpired:
                a.kill()
        for p in procs:
            p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

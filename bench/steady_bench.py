#!/usr/bin/env python3
"""Steady-state cost of the agent, for bench/sections/05-steady.sh.

    steady_bench.py --sg BIN --work DIR --store s3://BUCKET/PREFIX
                    --endpoint URL --seconds N --json OUT.json

Runs `spotguard run` with its default settings (IMDS poll every 2 s, lease
heartbeat 30 s, upload interval 5 min) supervising an idle trainer
(`sleep infinity`: it never writes a checkpoint), with the IMDS simulator
(tests/tools/imds_sim.py) as the metadata service and the S3 gateway as the
store, reached through a counting pass-through proxy in this script. Once the
trainer has started, it measures over N seconds:

  cpu_s        the agent's user+system CPU (/proc/PID/stat, all its threads)
  hwm_kib      the agent's peak resident set (VmHWM, /proc/PID/status) at the end
  imds         requests the simulator answered (its /_sim/requests log)
  s3           requests that went through the proxy, by method

The proxy forwards each request unchanged (Host header included, so the
SigV4 signature still matches) to the gateway and the answer back; it only
counts. Startup (restore check, lease, first IMDS calls) is reported apart.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
       "upgrade", "expect"}


def fail(msg):
    print("steady_bench: " + msg, file=sys.stderr)
    sys.exit(1)


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_method = {}

    def add(self, method):
        with self.lock:
            self.by_method[method] = self.by_method.get(method, 0) + 1

    def snapshot(self):
        with self.lock:
            return dict(self.by_method)


def make_proxy(upstream, counter):
    up = urllib.parse.urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def forward(self):
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                self.send_error(501, "chunked request bodies are not supported by this proxy")
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            conn = http.client.HTTPConnection(up.hostname, up.port or 80, timeout=120)
            try:
                conn.putrequest(self.command, self.path, skip_host=True,
                                skip_accept_encoding=True)
                for k, v in headers.items():
                    conn.putheader(k, v)
                conn.endheaders(body)
                resp = conn.getresponse()
                data = resp.read()
            finally:
                conn.close()
            counter.add(self.command)
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            if self.command == "HEAD":
                self.send_header("Content-Length", resp.getheader("Content-Length", "0"))
            else:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Imds:
    def __init__(self, work):
        port_file = os.path.join(work, "imds.port")
        self.proc = subprocess.Popen(
            [PY, os.path.join(ROOT, "tests/tools/imds_sim.py"), "--port", "0",
             "--port-file", port_file], stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(work, "imds.log"), "w"))
        for _ in range(100):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.1)
        else:
            fail("the IMDS simulator did not start")
        self.endpoint = "http://127.0.0.1:" + open(port_file).read().strip()

    def requests(self):
        with urllib.request.urlopen(self.endpoint + "/_sim/requests", timeout=10) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is state (field 3); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sg", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    work = os.path.join(args.work, "steady")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    counter = Counter()
    proxy = make_proxy(args.endpoint, counter)
    proxy_url = "http://127.0.0.1:%d" % proxy.server_address[1]
    imds = Imds(work)
    config = {"job": "steady", "store": args.store, "preset": "pytorch",
              "command": ["sleep", "infinity"]}
    cfg_path = os.path.join(work, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(config, f)
    env = dict(os.environ)
    # The bench environment switches IMDS off for awscli; the agent must use the simulator.
    for name in ("AWS_EC2_METADATA_DISABLED", "AWS_EC2_METADATA_SERVICE_ENDPOINT"):
        env.pop(name, None)
    env.update({"SPOTGUARD_CONFIG": "", "SPOTGUARD_LOG_FORMAT": "json",
                "SPOTGUARD_LOG_LEVEL": "info", "SPOTGUARD_ENDPOINT": proxy_url})
    log_path = os.path.join(work, "agent.log")
    started = time.time()
    with open(log_path, "w") as log:
        agent = subprocess.Popen([args.sg, "run", "-c", cfg_path, "--checkpoint-dir",
                                  os.path.join(work, "ckpt"), "--imds-endpoint", imds.endpoint],
                                 env=env, stdout=log, stderr=log)
    result = {}
    try:
        while "started the trainer" not in open(log_path).read():
            if agent.poll() is not None or time.time() - started > 60:
                fail("the agent did not start the trainer; see " + log_path)
            time.sleep(0.05)
        startup_s = time.time() - started
        s3_0, imds_0 = counter.snapshot(), len(imds.requests())
        cpu_0, t0 = cpu_seconds(agent.pid), time.time()
        time.sleep(args.seconds)
        cpu_1, t1 = cpu_seconds(agent.pid), time.time()
        hwm, rss = status_kib(agent.pid, "VmHWM"), status_kib(agent.pid, "VmRSS")
        threads = status_kib(agent.pid, "Threads")
        s3_1, imds_1 = counter.snapshot(), len(imds.requests())
        if agent.poll() is not None:
            fail("the agent exited during the measurement; see " + log_path)
        agent.send_signal(signal.SIGTERM)
        code = agent.wait(90)
        if code != 0:
            fail("the agent exited %d after SIGTERM, expected 0; see %s" % (code, log_path))
        window = t1 - t0
        s3_window = {m: s3_1.get(m, 0) - s3_0.get(m, 0) for m in s3_1}
        result = {
            "seconds": window,
            "startup_s": startup_s,
            "startup_cpu_s": cpu_0,
            "startup_s3_requests": sum(s3_0.values()),
            "startup_imds_requests": imds_0,
            "cpu_s": cpu_1 - cpu_0,
            "cpu_fraction_of_core": (cpu_1 - cpu_0) / window,
            "hwm_kib": hwm,
            "rss_kib": rss,
            "threads": threads,
            "imds_requests": imds_1 - imds_0,
            "imds_per_min": (imds_1 - imds_0) * 60 / window,
            "s3_requests": sum(s3_window.values()),
            "s3_per_min": sum(s3_window.values()) * 60 / window,
            "s3_by_method": s3_window,
        }
        if result["imds_requests"] == 0:
            fail("the simulator saw no IMDS request in %.0fs: the agent is not polling" % window)
        if result["startup_s3_requests"] == 0:
            fail("the proxy saw no S3 request at all: it is not in the agent's path")
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        print(json.dumps(result), file=sys.stderr)
    finally:
        if agent.poll() is None:  # a failed run: the agent stops its trainer on SIGTERM
            children = []
            try:
                tasks = os.listdir("/proc/%d/task" % agent.pid)
            except OSError:
                tasks = []
            for task in tasks:
                try:
                    with open("/proc/%d/task/%s/children" % (agent.pid, task)) as f:
                        children += [int(p) for p in f.read().split()]
                except OSError:
                    pass
            agent.terminate()
            try:
                agent.wait(90)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
            for pid in children:
                try:
                    with open("/proc/%d/cmdline" % pid, "rb") as f:
                        if f.read().startswith(b"sleep\0infinity"):
                            os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        imds.stop()
        proxy.shutdown()
        subprocess.run(["aws", "--endpoint-url", args.endpoint, "s3", "rm", "--recursive",
                        "--only-show-errors", args.store + "/"], check=False)


if __name__ == "__main__":
    main()

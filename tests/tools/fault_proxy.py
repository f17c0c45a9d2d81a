#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 proxy for spotguard's network reliability tests.

Stdlib only.  Listens on --host (default 127.0.0.1), forwards each request to
--upstream HOST:PORT (the Ceph gateway) over a connection of its own, and
injects faults into a configured share of the requests:

    fault_proxy.py --upstream 127.0.0.1:17480 [--host H] [--port 0]
                   [--port-file FILE] [--config JSON]

Fault kinds (one per faulted request):

* reset          the request is read but never forwarded; the client gets a
                 TCP reset (SO_LINGER 0).
* lost_response  the request is forwarded and the server's whole answer read,
                 then the client gets a reset instead: the operation happened
                 but the client never hears of it.
* stall          the server's answer is held for stall_seconds, then sent.
* hang           the request is read and never answered; the connection stays
                 open and silent until the client gives up (max hang_seconds).
* error500       a 500 InternalError S3 XML error, not forwarded.
* slowdown503    a 503 SlowDown S3 XML error, not forwarded.
* cut_request    only the first half of the request body reaches the server,
                 then both connections are cut (requests with a body only).
* cut_response   the answer's headers and half its body (below its
                 Content-Length) reach the client, then a reset (GET only).

Which requests: schedule "spread" (default) faults exactly one request at a
seeded random position in every window of round(1/rate) requests; "random"
faults each request with probability `rate`.  Kinds are used in turn from
`kinds`; one that does not apply to the request (cut_request without a body,
cut_response but for a GET) keeps its turn for the next faulted request it
applies to.  Optional
`delay_ms` delays every request, `bandwidth` (bytes/s, all connections
together) slows request and response bodies (only of the requests that
`bandwidth_match`, a regular expression searched in "METHOD /path?query",
matches, when it is set); `match` (a regular expression
searched in "METHOD /path?query") limits faults to the requests it matches;
`max_faults` (>= 0) stops injecting after that many faults.

Freeze (a network partition whose writes land late): `freeze_match` (a
regular expression searched in "METHOD /path?query").  The first request that
matches freezes the proxy: it, and every request after it on any connection,
is read in full from the client and held, neither forwarded nor answered,
until POST /_proxy/release.  The release forwards every held request to
upstream, one at a time in arrival order, each on a fresh connection, and
relays each answer to its client (a client that gave up meanwhile gets
nothing, but its request still reaches the server).  So the held writes land
late: after the release, after whatever other clients did meanwhile.  A release
disarms the freeze (`freeze_match` is cleared); set it again to freeze again.
Fencing trials use `{"freeze_match": "PUT .*/manifest\\.json"}`: spotguard
renews its lease right before the manifest PUT, so traffic freezes right after
that renewal.

Pause (a process stopped right after a request): `pause_match` (a regular
expression, as above).  The first matching request (after one matching
`pause_arm_match`, when that is set) is forwarded and carried out as usual,
but its answer is held until POST /_proxy/continue (or `pause_seconds`,
default 60, have passed).  Other requests pass meanwhile.  One-shot: the pause
disarms itself (both expressions are cleared).  The test stops the client
(SIGSTOP) while the answer is held, then lets the answer go into the stopped
client's socket.  E.g. `{"pause_arm_match": "PUT .*/files/", "pause_match":
"PUT .*/lease$"}` holds the answer to the lease renewal that precedes a
snapshot's commit.

Control (not counted, never faulted), under /_proxy/ (no S3 bucket name starts
with "_"):

* GET  /_proxy/stats   {"requests", "faults": {kind: n}, "injected",
                        "keys": {access key id: requests},
                        "key_bytes": {access key id: request body bytes}, "events": [...],
                        "hangs_ended_by_client"/"_by_proxy": n,
                        "frozen": bool, "held": requests held now,
                        "held_requests": ["M /p", ...] in arrival order,
                        "freeze_log": [{"method", "path", "status"}] of
                        released requests (status 0: upstream did not answer),
                        "paused": bool (an answer is held now), "paused_request": "M /p",
                        "pauses": n, "log": the last 200 requests ["M /p", ...]}
* POST /_proxy/config  JSON merged into the configuration (rate, schedule,
                       seed, kinds, stall_seconds, hang_seconds, delay_ms,
                       bandwidth, bandwidth_match, match, max_faults, freeze_match,
                       pause_match, pause_arm_match, pause_seconds); restarts
                       the schedule's window (the turn of kinds carries on
                       unless `kinds` changes)
* POST /_proxy/release forwards the held requests in arrival order, answers
                       {"released": n, "requests": [...as in freeze_log]}
* POST /_proxy/continue lets a paused answer go, {"continued": bool}
* POST /_proxy/reset   zeroes the statistics (not the freeze or the pause)

Authorization headers are read only for the access key id; secrets never pass
through this proxy (SigV4 sends none) and nothing is logged.
"""

import argparse
import json
import random
import re
import socket
import struct
import threading
import time

KINDS = ["reset", "lost_response", "stall", "hang", "error500", "slowdown503",
         "cut_request", "cut_response"]
CHUNK = 64 * 1024


class Closed(Exception):
    pass


class Conn:
    """A socket with a read buffer."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def fill(self):
        data = self.sock.recv(CHUNK)
        if not data:
            raise Closed()
        self.buf += data

    def read_head(self):
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > 1 << 20:
                raise Closed()
            self.fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        return head + b"\r\n\r\n"

    def read_some(self, limit):
        if not self.buf:
            self.fill()
        out, self.buf = self.buf[:limit], self.buf[limit:]
        return out

    def read_line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line + b"\r\n"


def parse_head(head):
    lines = head.decode("latin-1").split("\r\n")
    first = lines[0]
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return first, headers


def reset(sock):
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass


def s3_error(status, reason, code, message):
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
            "<Message>%s</Message><RequestId>fault-proxy-%d</RequestId></Error>"
            % (code, message, random.randrange(1 << 30))).encode()
    head = ("HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n"
            "x-amz-request-id: fault-proxy\r\n\r\n" % (status, reason, len(body))).encode()
    return head + body


class Sink:
    """Collects bytes that pipe_body would send to a socket."""

    def __init__(self):
        self.data = bytearray()

    def sendall(self, data):
        self.data += data


class Held:
    """A request held by the freeze: its bytes, and later its answer."""

    def __init__(self, method, target, data):
        self.method = method
        self.target = target
        self.data = data
        self.answer = None  # bytes, or None when upstream did not answer
        self.close = True
        self.done = threading.Event()


class Proxy:
    def __init__(self, upstream, config):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.lock = threading.Lock()
        self.config = {"rate": 0.0, "schedule": "spread", "seed": 1, "kinds": list(KINDS),
                       "stall_seconds": 3.0, "hang_seconds": 300.0, "delay_ms": 0,
                       "bandwidth": 0, "bandwidth_match": "", "match": "", "max_faults": -1,
                       "freeze_match": "", "pause_match": "", "pause_arm_match": "",
                       "pause_seconds": 60.0}
        self.bw_next = 0.0
        self.frozen = False
        self.held = []  # [Held] in arrival order
        self.freeze_log = []
        self.pause_armed = False  # pause_arm_match was seen
        self.paused = None  # "METHOD /path" whose answer is held
        self.pause_event = threading.Event()
        self.pauses = 0
        self.apply_config(config)
        self.reset_stats()

    def reset_stats(self):
        self.requests = 0
        self.faults = {}
        self.keys = {}
        self.key_bytes = {}
        self.events = []
        self.hang_ends = {}
        self.log = []
        self.local = threading.local()  # .throttled: this request's bodies are slowed

    def apply_config(self, update):
        for k in update:
            if k not in self.config:
                raise ValueError("unknown config key " + k)
        self.config.update(update)
        if "pause_match" in update or "pause_arm_match" in update:
            self.pause_armed = False
        for k in self.config["kinds"]:
            if k not in KINDS:
                raise ValueError("unknown fault kind " + k)
        self.rng = random.Random(self.config["seed"])
        self.window_pos = 0
        self.window_slot = -1
        if "kinds" in update or not hasattr(self, "kind_turns"):
            self.kind_turns = list(self.config["kinds"])  # else the kinds keep taking turns

    # ---- decisions (under self.lock) ----
    def decide(self, method, target, has_body):
        rate = float(self.config["rate"])
        if rate <= 0 or not self.config["kinds"]:
            return None
        if 0 <= self.config["max_faults"] <= sum(self.faults.values()):
            return None
        if self.config["match"] and not re.search(self.config["match"], method + " " + target):
            return None
        if self.config["schedule"] == "random":
            hit = self.rng.random() < rate
        else:
            window = max(1, int(round(1.0 / rate)))
            if self.window_pos % window == 0:
                self.window_slot = self.rng.randrange(window)
            hit = self.window_pos % window == self.window_slot
            self.window_pos += 1
        if not hit:
            return None
        # The first kind in turn that applies to this request goes to the
        # back of the turns; one that does not apply keeps its place, so it
        # is used at the next faulted request it applies to (every kind is
        # injected, whatever the mix of requests).
        for i, kind in enumerate(self.kind_turns):
            if kind == "cut_request" and not has_body:
                continue
            if kind == "cut_response" and method != "GET":
                continue
            self.kind_turns.append(self.kind_turns.pop(i))
            return kind
        return None

    def record(self, seq, method, path, kind):  # under self.lock
        self.faults[kind] = self.faults.get(kind, 0) + 1
        self.events.append({"seq": seq, "method": method, "path": path, "kind": kind,
                            "time": time.time()})

    def throttle(self, n):
        bw = float(self.config["bandwidth"])
        if bw <= 0 or not getattr(self.local, "throttled", True):
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.bw_next)
            self.bw_next = start + n / bw
        if start > now:
            time.sleep(start - now)

    # ---- body transfer ----
    def pipe_body(self, src, dst, headers, method_or_none, status=None, limit=None):
        """Copies one message body from src (Conn) to dst (socket or None).
        Returns the bytes copied; stops after `limit` bytes when given."""
        copied = 0

        def send(data):
            nonlocal copied
            if limit is not None and copied + len(data) > limit:
                data = data[:limit - copied]
            self.throttle(len(data))
            if dst is not None and data:
                dst.sendall(data)
            copied += len(data)
            return limit is not None and copied >= limit

        if status is not None and (method_or_none == "HEAD" or status in (204, 304)
                                   or 100 <= status < 200):
            return 0
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                line = src.read_line()
                if send(line):
                    return copied
                size = int(line.split(b";")[0].strip() or b"0", 16)
                remaining = size + 2
                if size == 0:
                    # trailers until an empty line
                    while True:
                        t = src.read_line()
                        if send(t) or t == b"\r\n":
                            return copied
                while remaining:
                    data = src.read_some(min(CHUNK, remaining))
                    remaining -= len(data)
                    if send(data):
                        return copied
        length = headers.get("content-length")
        if length is None:
            if status is None:
                return 0  # a request without a length has no body
            try:  # a response delimited by the connection's end
                while True:
                    if send(src.read_some(CHUNK)):
                        return copied
            except Closed:
                return copied
        remaining = int(length)
        while remaining:
            data = src.read_some(min(CHUNK, remaining))
            remaining -= len(data)
            if send(data):
                return copied
        return copied

    # ---- one client connection ----
    def serve(self, client_sock):
        client = Conn(client_sock)
        upstream = None
        try:
            while True:
                head = client.read_head()
                first, headers = parse_head(head)
                method, target = first.split(" ")[0], first.split(" ")[1]
                if target.startswith("/_proxy/"):
                    self.control(client, client_sock, method, target, headers)
                    continue
                m = re.search(r"Credential=([^/,\s]+)/", headers.get("authorization", ""))
                has_body = int(headers.get("content-length", "0") or 0) >= 2 or \
                    "chunked" in headers.get("transfer-encoding", "").lower()
                line = method + " " + target
                with self.lock:
                    bm = self.config.get("bandwidth_match", "")
                    self.local.throttled = not bm or bool(re.search(bm, line))
                    self.log = (self.log + [line])[-200:]
                    fm = self.config["freeze_match"]
                    if not self.frozen and fm and re.search(fm, line):
                        self.frozen = True
                    frozen = self.frozen
                    pause = False
                    if not self.frozen and self.config["pause_match"] and self.paused is None:
                        am = self.config["pause_arm_match"]
                        if not am or self.pause_armed:
                            pause = bool(re.search(self.config["pause_match"], line))
                        elif re.search(am, line):
                            self.pause_armed = True
                        if pause:
                            self.paused = line
                            self.pauses += 1
                            self.pause_event.clear()
                            self.config["pause_match"] = ""
                            self.config["pause_arm_match"] = ""
                            self.pause_armed = False
                if frozen:
                    sink = Sink()
                    self.pipe_body(client, sink, headers, None)
                    held = Held(method, target, head + bytes(sink.data))
                    with self.lock:
                        self.held.append(held)
                    held.done.wait()
                    if held.answer is None:
                        reset(client_sock)
                        return
                    client_sock.sendall(held.answer)
                    if held.close:
                        client_sock.close()
                        return
                    continue
                with self.lock:
                    self.requests += 1
                    seq = self.requests
                    if m:
                        self.keys[m.group(1)] = self.keys.get(m.group(1), 0) + 1
                        self.key_bytes[m.group(1)] = self.key_bytes.get(m.group(1), 0) + \
                            int(headers.get("content-length", "0") or 0)
                    kind = self.decide(method, target, has_body)
                    if kind:
                        self.record(seq, method, target, kind)
                if self.config["delay_ms"]:
                    time.sleep(float(self.config["delay_ms"]) / 1000.0)
                if kind == "reset":
                    reset(client_sock)
                    return
                if kind == "hang":
                    client_sock.settimeout(1.0)
                    deadline = time.monotonic() + float(self.config["hang_seconds"])
                    gave_up = False
                    while time.monotonic() < deadline and not gave_up:
                        try:
                            gave_up = not client_sock.recv(CHUNK)
                        except socket.timeout:
                            continue
                        except OSError:
                            gave_up = True
                    with self.lock:
                        key = "hangs_ended_by_client" if gave_up else "hangs_ended_by_proxy"
                        self.hang_ends[key] = self.hang_ends.get(key, 0) + 1
                    reset(client_sock)
                    return
                if kind in ("error500", "slowdown503"):
                    self.pipe_body(client, None, headers, None)
                    if kind == "error500":
                        reply = s3_error(500, "Internal Server Error", "InternalError",
                                         "fault proxy: injected internal error")
                    else:
                        reply = s3_error(503, "Slow Down", "SlowDown",
                                         "fault proxy: please reduce your request rate")
                    client_sock.sendall(reply)
                    continue
                if upstream is None:
                    upstream = Conn(socket.create_connection(self.upstream, timeout=600))
                upstream.sock.sendall(head)
                if kind == "cut_request":
                    total = int(headers.get("content-length", "2"))
                    self.pipe_body(client, upstream.sock, headers, None, limit=max(1, total // 2))
                    reset(upstream.sock)
                    reset(client_sock)
                    return
                self.pipe_body(client, upstream.sock, headers, None)
                rhead = upstream.read_head()
                rfirst, rheaders = parse_head(rhead)
                status = int(rfirst.split(" ")[1])
                if kind == "lost_response":
                    self.pipe_body(upstream, None, rheaders, method, status)
                    reset(client_sock)
                    return
                if kind == "stall":
                    time.sleep(float(self.config["stall_seconds"]))
                if pause:
                    # Carried out upstream; the answer waits for /_proxy/continue.
                    self.pause_event.wait(float(self.config["pause_seconds"]))
                    with self.lock:
                        self.paused = None
                if kind == "cut_response":
                    length = int(rheaders.get("content-length", "0") or 0)
                    client_sock.sendall(rhead)
                    if length >= 2:
                        self.pipe_body(upstream, client_sock, rheaders, method, status,
                                       limit=length // 2)
                    reset(upstream.sock)
                    reset(client_sock)
                    return
                client_sock.sendall(rhead)
                self.pipe_body(upstream, client_sock, rheaders, method, status)
                if "close" in rheaders.get("connection", "").lower() or \
                        (rheaders.get("content-length") is None and
                         "chunked" not in rheaders.get("transfer-encoding", "").lower() and
                         method != "HEAD" and status not in (204, 304)):
                    client_sock.close()
                    return
        except (Closed, OSError, ValueError, IndexError):
            pass
        finally:
            for s in (client_sock, upstream.sock if upstream else None):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass

    def forward_held(self, held):
        """Sends one held request upstream on a fresh connection; returns the
        status (0 when there was no answer) and sets held.answer."""
        status = 0
        try:
            up = Conn(socket.create_connection(self.upstream, timeout=120))
            try:
                up.sock.sendall(held.data)
                rhead = up.read_head()
                rfirst, rheaders = parse_head(rhead)
                status = int(rfirst.split(" ")[1])
                sink = Sink()
                self.pipe_body(up, sink, rheaders, held.method, status)
                held.answer = rhead + bytes(sink.data)
                held.close = "close" in rheaders.get("connection", "").lower() or (
                    rheaders.get("content-length") is None and
                    "chunked" not in rheaders.get("transfer-encoding", "").lower() and
                    held.method != "HEAD" and status not in (204, 304))
            finally:
                up.sock.close()
        except (Closed, OSError, ValueError, IndexError):
            pass
        return status

    def release(self):
        """Ends the freeze: forwards the held requests in arrival order.  New
        requests are held behind them until the last one has been answered."""
        released = []
        while True:
            with self.lock:
                if not self.held:
                    self.frozen = False
                    self.config["freeze_match"] = ""
                    break
                held = self.held.pop(0)
            status = self.forward_held(held)
            entry = {"method": held.method, "path": held.target, "status": status}
            held.done.set()
            released.append(entry)
            with self.lock:
                self.freeze_log.append(entry)
        return {"released": len(released), "requests": released}

    def control(self, client, sock, method, target, headers):
        body = b""
        n = int(headers.get("content-length", "0") or 0)
        while len(body) < n:
            body += client.read_some(n - len(body))
        status = 200
        if method == "GET" and target == "/_proxy/stats":
            with self.lock:
                out = {"requests": self.requests, "faults": dict(self.faults),
                       "injected": sum(self.faults.values()), "keys": dict(self.keys),
                       "key_bytes": dict(self.key_bytes),
                       "events": list(self.events), "config": dict(self.config)}
                out.update(self.hang_ends)
                out.update({"frozen": self.frozen, "held": len(self.held),
                            "held_requests": [h.method + " " + h.target for h in self.held],
                            "freeze_log": list(self.freeze_log),
                            "paused": self.paused is not None,
                            "paused_request": self.paused or "", "pauses": self.pauses,
                            "log": list(self.log)})
        elif method == "POST" and target == "/_proxy/config":
            try:
                with self.lock:
                    self.apply_config(json.loads(body or b"{}"))
                    out = {"config": dict(self.config)}
            except (ValueError, TypeError) as e:
                status, out = 400, {"error": str(e)}
        elif method == "POST" and target == "/_proxy/release":
            out = self.release()
        elif method == "POST" and target == "/_proxy/continue":
            with self.lock:
                was = self.paused is not None
            self.pause_event.set()
            out = {"continued": was}
        elif method == "POST" and target == "/_proxy/reset":
            with self.lock:
                self.reset_stats()
            out = {"ok": True}
        else:
            status, out = 404, {"error": "no such control endpoint"}
        data = json.dumps(out).encode()
        sock.sendall(("HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d"
                      "\r\n\r\n" % (status, len(data))).encode() + data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--config", default="{}")
    args = ap.parse_args()
    proxy = Proxy(args.upstream, json.loads(args.config))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((args.host, args.port))
    listener.listen(128)
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(listener.getsockname()[1]))
        import os
        os.rename(args.port_file + ".tmp", args.port_file)
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=proxy.serve, args=(sock,), daemon=True).start()


if __name__ == "__main__":
    main()

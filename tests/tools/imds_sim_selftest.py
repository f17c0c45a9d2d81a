#!/usr/bin/env python3
"""Self-test for imds_sim.py: starts the simulator as a subprocess (with the same
interpreter) and checks its documented behaviour.  Stdlib only.  Exit status 0 when
every check passes, 1 otherwise.

    python3 tests/tools/imds_sim_selftest.py [-v]
"""

import calendar
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SIM = os.path.join(HERE, "imds_sim.py")
TTL = "X-aws-ec2-metadata-token-ttl-seconds"
TOK = "X-aws-ec2-metadata-token"
MD = "/latest/meta-data/"
VERBOSE = "-v" in sys.argv[1:]

failures = []
passed = [0]


def check(cond, what):
    if cond:
        passed[0] += 1
        if VERBOSE:
            print("  ok   %s" % what)
    else:
        failures.append(what)
        print("  FAIL %s" % what)


def eq(got, want, what):
    check(got == want, "%s (got %r, want %r)" % (what, got, want) if got != want else what)


def utc_epoch(s):
    return calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))


class Sim:
    """A running simulator process plus one persistent (keep-alive) connection."""

    def __init__(self, *extra):
        self.dir = tempfile.mkdtemp(prefix="imds_sim_test.")
        self.port_file = os.path.join(self.dir, "port")
        self.err_path = os.path.join(self.dir, "stderr")
        self.err = open(self.err_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, SIM, "--port", "0", "--port-file", self.port_file] + list(extra),
            stdout=subprocess.DEVNULL, stderr=self.err)
        deadline = time.time() + 10
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None:
                raise RuntimeError("simulator exited early: %s" % self.stderr())
            if time.time() > deadline:
                raise RuntimeError("simulator did not write its port file")
            time.sleep(0.02)
        with open(self.port_file) as f:
            self.port = int(f.read().strip())
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        self.conn.connect()
        self.sock = self.conn.sock
        self.reconnects = 0

    def stderr(self):
        self.err.flush()
        with open(self.err_path) as f:
            return f.read()

    def req(self, method, path, headers=None, body=None, conn=None):
        """(status, headers, body bytes) over the persistent connection."""
        c = conn or self.conn
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        if conn is None:
            cl = hdrs.get("content-length")
            if cl is None or (method != "HEAD" and int(cl) != len(data)):
                failures.append("bad Content-Length on %s %s: %r vs %d bytes"
                                % (method, path, cl, len(data)))
            if r.will_close or c.sock is not self.sock:
                self.reconnects += 1
                c.close()
                c.connect()
                self.sock = c.sock
        return r.status, hdrs, data

    def ctl(self, method, path, body=None):
        st, _, data = self.req(method, "/_sim/" + path, body=body)
        return st, json.loads(data.decode())

    def token(self, ttl="21600"):
        st, h, data = self.req("PUT", "/latest/api/token", {TTL: ttl})
        if st != 200:
            raise RuntimeError("token PUT failed: %d" % st)
        return data.decode()

    def get(self, path, token=None, extra=None):
        h = dict(extra or {})
        if token is not None:
            h[TOK] = token
        return self.req("GET", path, h)

    def stop(self, sig=signal.SIGTERM):
        try:
            self.conn.close()
        except Exception:
            pass
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = "hung"
        self.err.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc


def test_tokens(s):
    print("token issue / TTL bounds")
    for bad, label in (("0", "0"), ("21601", "21601"), ("abc", "non-integer"),
                       ("-5", "negative"), ("1.5", "fractional")):
        st, _, _ = s.req("PUT", "/latest/api/token", {TTL: bad})
        eq(st, 400, "ttl %s -> 400" % label)
    st, _, _ = s.req("PUT", "/latest/api/token")
    eq(st, 400, "missing ttl header -> 400")
    for good in ("1", "21600"):
        st, h, body = s.req("PUT", "/latest/api/token", {TTL: good})
        eq(st, 200, "ttl %s -> 200" % good)
        eq(h.get(TTL.lower()), good, "ttl %s echoed in response header" % good)
        check(len(body) > 20 and b"\n" not in body, "token body looks like a token")
        check(h.get("content-type", "").startswith("text/plain"), "token is text/plain")
    st, _, _ = s.req("PUT", "/latest/api/token", {TTL: "60", "X-Forwarded-For": "10.1.2.3"})
    eq(st, 403, "PUT token with X-Forwarded-For -> 403")
    st, h, _ = s.req("GET", "/latest/api/token", {TTL: "60"})
    eq(st, 405, "GET on token path -> 405")
    check("PUT" in h.get("allow", ""), "405 carries Allow: PUT")
    st, _, _ = s.req("PUT", "/2021-03-23/api/token", {TTL: "60"})
    eq(st, 403, "PUT to version-specific token path -> 403")


def test_auth(s):
    print("token enforcement")
    st, _, _ = s.get(MD + "instance-id")
    eq(st, 401, "required mode, no token -> 401")
    st, _, _ = s.get(MD + "instance-id", "AQAEAbogus-token")
    eq(st, 401, "required mode, unknown token -> 401")
    t = s.token("300")
    st, h, body = s.get(MD + "instance-id", t)
    eq((st, body), (200, b"i-0123456789abcdef0"), "valid token -> instance-id")
    check(h.get("content-type", "").startswith("text/plain"), "metadata is text/plain")

    eq(s.ctl("POST", "tokens", {"required": False})[0], 200, "switch to optional mode")
    st, _, body = s.get(MD + "instance-id")
    eq((st, body), (200, b"i-0123456789abcdef0"), "optional mode, no token -> 200 (IMDSv1)")
    st, _, _ = s.get(MD + "instance-id", "AQAEAbogus-token")
    eq(st, 401, "optional mode, invalid token -> 401")
    eq(s.ctl("POST", "tokens", {"required": "yes"})[0], 400, "tokens: bad body -> 400")
    eq(s.ctl("POST", "tokens", {"required": True})[0], 200, "back to required mode")
    st, _, _ = s.get(MD + "instance-id")
    eq(st, 401, "required again, no token -> 401")

    eq(s.ctl("POST", "expire-tokens")[0], 200, "expire-tokens")
    st, _, _ = s.get(MD + "instance-id", t)
    eq(st, 401, "expired (expire-tokens) token -> 401")
    s.ctl("POST", "tokens", {"required": False})
    st, _, _ = s.get(MD + "instance-id", t)
    eq(st, 401, "expired token -> 401 even in optional mode")
    s.ctl("POST", "tokens", {"required": True})
    t2 = s.token()
    eq(s.get(MD + "instance-id", t2)[0], 200, "token issued after expire-tokens works")

    short = s.token("1")
    eq(s.get(MD + "instance-id", short)[0], 200, "ttl=1 token works at once")
    return short


def test_listing_and_404(s, t):
    print("listings / 404 / HEAD")
    st, h, body = s.get(MD, t)
    names = body.decode().split("\n")
    eq(st, 200, "meta-data/ listing")
    check(not body.endswith(b"\n"), "listing has no trailing newline")
    for n in ("ami-id", "instance-id", "instance-type", "instance-life-cycle",
              "placement/", "iam/", "events/", "autoscaling/"):
        check(n in names, "meta-data/ lists %s" % n)
    check("spot/" not in names, "no spot/ entry before a notice")
    st, _, body = s.get(MD + "placement/", t)
    eq(sorted(body.decode().split("\n")), ["availability-zone", "region"],
       "placement/ listing")
    st, _, body2 = s.get(MD + "placement", t)
    eq((st, body2), (200, body), "placement without slash is also a listing")
    st, h, body = s.get(MD + "no-such-thing", t)
    eq(st, 404, "unknown path -> 404")
    check(0 < len(body) < 100 and h.get("content-type", "").startswith("text/plain"),
          "404 has a small text/plain body")
    eq(s.get(MD + "instance-id/", t)[0], 404, "leaf with trailing slash -> 404")
    eq(s.get("/nope", t)[0], 404, "path outside /latest -> 404")
    eq(s.get(MD + "instance-life-cycle", t)[2], b"spot", "instance-life-cycle = spot")
    eq(s.get(MD + "instance-type", t)[2], b"g5.xlarge", "instance-type default")
    eq(s.get(MD + "ami-id", t)[2], b"ami-0abcdef1234567890", "ami-id default")
    st, h, body = s.req("HEAD", MD + "instance-id", {TOK: t})
    eq((st, body, h.get("content-length")), (200, b"", str(len("i-0123456789abcdef0"))),
       "HEAD: no body, GET's Content-Length")


def test_spot(s, t, short_token):
    print("spot/instance-action")
    st, _, body = s.get(MD + "spot/instance-action", t)
    eq(st, 404, "instance-action 404 before a notice")
    eq(s.ctl("POST", "spot-notice", {"action": "explode"})[0], 400, "bad action -> 400")
    eq(s.ctl("POST", "spot-notice", {"action": "stop", "bogus": 1})[0], 400,
       "unknown field -> 400")
    st, _, _ = s.req("POST", "/_sim/spot-notice", body="{not json")
    eq(st, 400, "invalid JSON -> 400")
    before = time.time()
    st, resp = s.ctl("POST", "spot-notice", {"action": "stop", "in_seconds": 120})
    eq((st, resp.get("ok")), (200, True), "set stop notice")
    st, h, body1 = s.get(MD + "spot/instance-action", t)
    eq(st, 200, "instance-action 200 after notice")
    doc = json.loads(body1.decode())
    eq(sorted(doc), ["action", "time"], "instance-action fields")
    eq(doc["action"], "stop", "action = stop")
    when = utc_epoch(doc["time"])
    check(before + 115 <= when <= time.time() + 125, "time is ~120 s ahead")
    check(h.get("content-type", "").startswith("text/plain"), "JSON body still text/plain")
    check("spot/" in s.get(MD, t)[2].decode().split("\n"), "spot/ listed after notice")
    eq(s.get(MD + "spot/termination-time", t)[0], 404, "no termination-time for stop")
    # The ttl=1 token from test_auth has been alive > 1 s by now in most runs; make sure.
    time.sleep(max(0.0, 1.05 - (time.time() - short_token[1])))
    st, _, _ = s.get(MD + "instance-id", short_token[0])
    eq(st, 401, "ttl=1 token expired after 1 s -> 401")
    st, _, body2 = s.get(MD + "spot/instance-action", t)
    eq(body2, body1, "instance-action time is fixed across reads")
    s.ctl("POST", "spot-notice", {"action": "terminate", "time": "2026-11-22T08:22:00Z"})
    st, _, body = s.get(MD + "spot/instance-action", t)
    eq(json.loads(body.decode()), {"action": "terminate", "time": "2026-11-22T08:22:00Z"},
       "explicit time honoured")
    eq(s.get(MD + "spot/termination-time", t)[2], b"2026-11-22T08:22:00Z",
       "termination-time for terminate")
    eq(s.ctl("POST", "spot-notice", {"time": "tomorrow"})[0], 400, "bad time -> 400")
    eq(s.ctl("POST", "spot-notice", {"action": "hibernate"})[0], 200, "hibernate accepted")
    eq(json.loads(s.get(MD + "spot/instance-action", t)[2].decode())["action"], "hibernate",
       "hibernate notice")
    eq(s.ctl("DELETE", "spot-notice")[0], 200, "clear notice")
    eq(s.get(MD + "spot/instance-action", t)[0], 404, "instance-action 404 after clear")


def test_rebalance_lifecycle_events(s, t):
    print("rebalance / lifecycle / scheduled events")
    path = MD + "events/recommendations/rebalance"
    eq(s.get(path, t)[0], 404, "rebalance 404 before set")
    before = int(time.time())
    eq(s.ctl("POST", "rebalance", {})[0], 200, "set rebalance")
    st, _, body = s.get(path, t)
    doc = json.loads(body.decode())
    eq((st, list(doc)), (200, ["noticeTime"]), "rebalance JSON has noticeTime")
    check(before - 1 <= utc_epoch(doc["noticeTime"]) <= time.time() + 1, "noticeTime = now")
    s.ctl("POST", "rebalance", {"noticeTime": "2026-11-22T08:00:00Z"})
    eq(json.loads(s.get(path, t)[2].decode()), {"noticeTime": "2026-11-22T08:00:00Z"},
       "explicit noticeTime")
    eq(s.ctl("POST", "rebalance", {"noticeTime": 5})[0], 400, "bad noticeTime -> 400")
    s.ctl("DELETE", "rebalance")
    eq(s.get(path, t)[0], 404, "rebalance 404 after clear")

    lc = MD + "autoscaling/target-lifecycle-state"
    eq(s.get(lc, t)[2], b"InService", "lifecycle default InService")
    eq(s.ctl("POST", "lifecycle", {"state": "Terminated"})[0], 200, "set Terminated")
    eq(s.get(lc, t)[2], b"Terminated", "lifecycle now Terminated")
    eq(s.ctl("POST", "lifecycle", {})[0], 400, "lifecycle without state -> 400")
    eq(s.ctl("POST", "lifecycle", [1])[0], 400, "lifecycle non-object -> 400")

    sp = MD + "events/maintenance/scheduled"
    st, _, body = s.get(sp, t)
    eq((st, body), (200, b"[]"), "scheduled events default []")
    ev = {"Code": "instance-stop", "NotBefore": "21 Jan 2027 09:00:43 GMT"}
    eq(s.ctl("POST", "scheduled-events", [ev])[0], 200, "set scheduled events")
    evs = json.loads(s.get(sp, t)[2].decode())
    check(isinstance(evs, list) and len(evs) == 1, "one scheduled event")
    e = evs[0]
    for k in ("Code", "Description", "EventId", "NotBefore", "NotAfter", "State"):
        check(k in e, "scheduled event has %s" % k)
    eq((e["Code"], e["NotBefore"], e["State"]),
       ("instance-stop", "21 Jan 2027 09:00:43 GMT", "active"), "scheduled event values")
    eq(s.ctl("POST", "scheduled-events", {"Code": "x"})[0], 400, "events: non-list -> 400")


def test_identity(s, t):
    print("identity document")
    st, h, body = s.get("/latest/dynamic/instance-identity/document", t)
    eq(st, 200, "identity document 200")
    check(h.get("content-type", "").startswith("text/plain"), "identity doc is text/plain")
    doc = json.loads(body.decode())
    for k in ("accountId", "architecture", "availabilityZone", "imageId", "instanceId",
              "instanceType", "pendingTime", "privateIp", "region", "version"):
        check(k in doc, "identity doc has %s" % k)

    def consistent(label):
        d = json.loads(s.get("/latest/dynamic/instance-identity/document", t)[2].decode())
        g = lambda p: s.get(MD + p, t)[2].decode()  # noqa: E731
        eq(d["instanceId"], g("instance-id"), label + ": instanceId = instance-id")
        eq(d["instanceType"], g("instance-type"), label + ": instanceType = instance-type")
        eq(d["region"], g("placement/region"), label + ": region = placement/region")
        eq(d["availabilityZone"], g("placement/availability-zone"),
           label + ": availabilityZone = placement/availability-zone")
        eq(d["imageId"], g("ami-id"), label + ": imageId = ami-id")
        eq(d["privateIp"], g("local-ipv4"), label + ": privateIp = local-ipv4")
        return d

    d = consistent("defaults")
    eq((d["instanceId"], d["region"], d["availabilityZone"], d["instanceType"]),
       ("i-0123456789abcdef0", "us-east-1", "us-east-1a", "g5.xlarge"), "identity defaults")
    eq(s.ctl("POST", "identity", {"region": "eu-west-1", "instanceType": "g6.2xlarge",
                                  "instanceId": "i-0fedcba9876543210"})[0], 200,
       "override identity")
    d = consistent("override")
    eq((d["region"], d["availabilityZone"], d["instanceType"]),
       ("eu-west-1", "eu-west-1a", "g6.2xlarge"), "override values (az derived)")
    s.ctl("POST", "identity", {"availabilityZone": "eu-west-1c"})
    eq(consistent("az only")["region"], "eu-west-1", "region derived from az")
    eq(s.ctl("POST", "identity", {"region": "us-west-2", "availabilityZone": "eu-west-1b"})[0],
       400, "az outside region -> 400")
    eq(s.ctl("POST", "identity", {"colour": "blue"})[0], 400, "unknown identity field -> 400")


def test_credentials(s, t):
    print("iam/security-credentials")
    base = MD + "iam/security-credentials/"
    eq(s.get(base, t)[2], b"spotguard-test-role", "role listing")
    st, _, body = s.get(base + "spotguard-test-role", t)
    c = json.loads(body.decode())
    eq(st, 200, "role credentials 200")
    for k in ("Code", "LastUpdated", "Type", "AccessKeyId", "SecretAccessKey", "Token",
              "Expiration"):
        check(k in c, "credentials have %s" % k)
    eq((c["Code"], c["Type"]), ("Success", "AWS-HMAC"), "Code/Type")
    exp = utc_epoch(c["Expiration"]) - time.time()
    check(6 * 3600 - 60 < exp <= 6 * 3600 + 5, "Expiration ~6 h ahead")
    eq(s.get(base + "other-role", t)[0], 404, "unknown role -> 404")
    eq(s.ctl("POST", "credentials", {"role": "r2", "AccessKeyId": "AKIDSIMTEST",
                                     "Expiration": "2030-01-01T00:00:00Z"})[0], 200,
       "update credentials")
    eq(s.get(base, t)[2], b"r2", "renamed role listed")
    eq(s.get(base + "spotguard-test-role", t)[0], 404, "old role now 404")
    c2 = json.loads(s.get(base + "r2", t)[2].decode())
    eq((c2["AccessKeyId"], c2["Expiration"], c2["SecretAccessKey"]),
       ("AKIDSIMTEST", "2030-01-01T00:00:00Z", c["SecretAccessKey"]), "partial update")
    eq(s.ctl("POST", "credentials", {"Expiration": "soon"})[0], 400, "bad Expiration -> 400")


def test_faults(s, t):
    print("faults")
    p = MD + "spot/instance-action"
    eq(s.ctl("POST", "fault", {"status": 500})[0], 400, "fault without path -> 400")
    eq(s.ctl("POST", "fault", {"path": p})[0], 400, "fault without effect -> 400")
    eq(s.ctl("POST", "fault", {"path": p, "status": 500, "count": 0})[0], 400, "count 0 -> 400")
    eq(s.ctl("POST", "fault", {"path": "/latest/meta-data/spot", "status": 500,
                               "count": 2})[0], 200, "add status fault (prefix)")
    eq([s.get(p, t)[0] for _ in range(3)], [500, 500, 404], "2 x 500 then normal 404")

    eq(s.ctl("POST", "fault", {"path": p, "delay_ms": 400})[0], 200, "add delay fault")
    t0 = time.time()
    st = s.get(p, t)[0]
    d1 = time.time() - t0
    t0 = time.time()
    s.get(p, t)
    d2 = time.time() - t0
    check(d1 >= 0.39 and st == 404, "delayed request took %.2fs, normal status" % d1)
    check(d2 < 0.3, "next request not delayed (%.2fs)" % d2)

    doc = "/latest/dynamic/instance-identity/document"
    s.ctl("POST", "fault", {"path": doc, "garbage": True, "count": 1})
    st, _, body = s.get(doc, t)
    bad = False
    try:
        json.loads(body.decode("utf-8"))
    except ValueError:
        bad = True
    check(st == 200 and bad, "garbage: 200 with malformed body")
    st, _, body = s.get(doc, t)
    check(st == 200 and json.loads(body.decode()), "garbage fault used up")

    s.ctl("POST", "fault", {"path": "/latest/api/token", "status": 503, "count": -1})
    eq([s.req("PUT", "/latest/api/token", {TTL: "60"})[0] for _ in range(3)],
       [503, 503, 503], "forever fault on the token path")
    eq(len(s.ctl("GET", "fault")[1]), 1, "GET /_sim/fault lists it")
    eq(s.ctl("DELETE", "fault")[0], 200, "clear faults")
    eq(s.req("PUT", "/latest/api/token", {TTL: "60"})[0], 200, "token path healthy again")
    s.ctl("POST", "fault", {"path": "/latest/", "status": 500, "method": "PUT"})
    eq(s.get(MD + "instance-id", t)[0], 200, "method-filtered fault skips GET")
    eq(s.req("PUT", "/latest/api/token", {TTL: "60"})[0], 500, "method-filtered fault hits PUT")


def test_requests_log(s, t):
    print("requests log")
    eq(s.ctl("DELETE", "requests")[0], 200, "clear log")
    eq(s.ctl("GET", "requests")[1], [], "log empty (control requests are not logged)")
    s.ctl("POST", "fault", {"path": MD + "instance-type", "status": 502})
    tok = s.token("60")
    s.get(MD + "instance-id", tok)
    s.get(MD + "instance-id")
    s.get(MD + "instance-id", "AQAEAnope")
    s.get(MD + "instance-type", tok)
    s.ctl("POST", "expire-tokens")
    s.get(MD + "instance-id", tok)
    log = s.ctl("GET", "requests")[1]
    got = [(r["method"], r["path"], r["token"], r["status"]) for r in log]
    want = [("PUT", "/latest/api/token", "none", 200),
            ("GET", MD + "instance-id", "valid", 200),
            ("GET", MD + "instance-id", "none", 401),
            ("GET", MD + "instance-id", "invalid", 401),
            ("GET", MD + "instance-type", "valid", 502),
            ("GET", MD + "instance-id", "expired", 401)]
    eq(got, want, "log entries")
    eq(log[4].get("fault"), "status", "faulted request marked in log")


def test_metadata_options(s):
    """The instance's MetadataOptions: a hop limit below the caller's hops drops the
    token PUT's answer (no answer at all); GETs still answer; a disabled endpoint
    answers 403."""
    eq(s.ctl("POST", "metadata-options", {"hop_limit": 0})[0], 400, "hop_limit 0 -> 400")
    eq(s.ctl("POST", "metadata-options", {"http_endpoint": "off"})[0], 400, "bad endpoint -> 400")
    eq(s.ctl("POST", "metadata-options", {"hop_limit": 1, "hops": 2})[0], 200, "hop limit 1, 2 hops")
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=1.5)
    try:
        c.request("PUT", "/latest/api/token", headers={TTL: "60"})
        c.getresponse()
        check(False, "hop limit 1 from 2 hops: the token PUT got an answer")
    except (socket.timeout, TimeoutError):
        check(True, "hop limit 1 from 2 hops: the token PUT gets no answer")
    finally:
        c.close()
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    st, _, _ = s.req("GET", MD + "instance-id", conn=c)
    eq(st, 401, "hop limit 1 from 2 hops: a GET still answers (401 without a token)")
    c.close()
    s.ctl("POST", "metadata-options", {"hop_limit": 2})
    check(len(s.token()) > 0, "hop limit 2 from 2 hops: the token arrives")
    s.ctl("POST", "metadata-options", {"http_endpoint": "disabled"})
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    eq(s.req("PUT", "/latest/api/token", {TTL: "60"}, conn=c)[0], 403, "disabled: token -> 403")
    c.close()
    s.ctl("POST", "reset")
    check(len(s.token()) > 0, "reset: metadata options back to the defaults")


def test_reset(s):
    print("reset")
    s.ctl("POST", "spot-notice", {})
    s.ctl("POST", "rebalance", {})
    s.ctl("POST", "lifecycle", {"state": "Terminated"})
    s.ctl("POST", "identity", {"region": "ap-south-1"})
    s.ctl("POST", "fault", {"path": "/", "status": 500, "count": -1})
    eq(s.ctl("POST", "reset")[0], 200, "reset")
    t = s.token()
    eq(s.get(MD + "spot/instance-action", t)[0], 404, "reset: no notice")
    eq(s.get(MD + "events/recommendations/rebalance", t)[0], 404, "reset: no rebalance")
    eq(s.get(MD + "autoscaling/target-lifecycle-state", t)[2], b"InService", "reset: lifecycle")
    eq(s.get(MD + "placement/region", t)[2], b"us-east-1", "reset: region")
    eq(s.get(MD + "iam/security-credentials/", t)[2], b"spotguard-test-role", "reset: role")
    eq(s.ctl("GET", "fault")[1], [], "reset: no faults")
    eq(s.ctl("GET", "nope")[0], 404, "unknown control endpoint -> 404")


def main():
    t_start = time.time()
    s = s2 = None
    try:
        s = Sim()
        line = "listening on 127.0.0.1:%d" % s.port
        deadline = time.time() + 3
        while line not in s.stderr() and time.time() < deadline:
            time.sleep(0.02)
        check(line in s.stderr(), "stderr says %r" % line)
        test_tokens(s)
        short = test_auth(s)
        short = (short, time.time())
        t = s.token()
        test_listing_and_404(s, t)
        test_spot(s, t, short)
        test_rebalance_lifecycle_events(s, t)
        test_identity(s, t)
        test_credentials(s, t)
        test_faults(s, t)
        s.ctl("DELETE", "fault")
        test_requests_log(s, t)
        test_reset(s)
        eq(s.reconnects, 0, "all requests shared one keep-alive connection")
        test_metadata_options(s)
        rc = s.stop(signal.SIGTERM)
        eq(rc, 0, "SIGTERM -> clean exit 0")
        check(not os.path.exists(s.port_file), "port file removed on exit")
        s = None

        print("second instance: --tokens optional, SIGINT")
        s2 = Sim("--tokens", "optional")
        st, _, body = s2.get(MD + "instance-id")
        eq((st, body), (200, b"i-0123456789abcdef0"), "--tokens optional: no token -> 200")
        eq(s2.get(MD + "instance-id", "AQAEAbad")[0], 401, "--tokens optional: bad token -> 401")
        s2.ctl("POST", "tokens", {"required": True})
        s2.ctl("POST", "reset")
        eq(s2.get(MD + "instance-id")[0], 200, "reset restores the --tokens default")
        eq(s2.stop(signal.SIGINT), 0, "SIGINT -> clean exit 0")
        s2 = None

        print("refuses non-loopback bind")
        r = subprocess.run([sys.executable, SIM, "--host", "0.0.0.0", "--port", "0"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=10)
        check(r.returncode != 0 and b"loopback" in r.stderr, "--host 0.0.0.0 rejected")
    except Exception:
        traceback.print_exc()
        failures.append("exception: %s" % sys.exc_info()[1])
    finally:
        for sim in (s, s2):
            if sim is not None and sim.proc.poll() is None:
                sim.proc.kill()
                sim.proc.wait()
            if sim is not None:
                shutil.rmtree(sim.dir, ignore_errors=True)
    took = time.time() - t_start
    if failures:
        print("imds_sim selftest: %d FAILED, %d passed (%.1fs, %s)"
              % (len(failures), passed[0], took, sys.executable))
        for f in failures:
            print("  - " + f)
        return 1
    print("imds_sim selftest: all %d checks passed (%.1fs, %s %s)"
          % (passed[0], took, sys.executable, sys.version.split()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

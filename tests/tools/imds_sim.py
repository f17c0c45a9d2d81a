#!/usr/bin/env python3
"""EC2 instance metadata service (IMDS) simulator for spotguard integration tests.

Stdlib only (Python 3.7+).  Serves an IMDSv2-style API on a loopback address plus a
small JSON control API under /_sim/ that tests use to inject spot interruption
notices, rebalance recommendations, lifecycle changes, faults, and so on.

    imds_sim.py [--host 127.0.0.1] [--port 0] [--port-file FILE]
                [--tokens required|optional] [--verbose]

Behaviour follows the EC2 user guide ("Use IMDSv2", "Access instance metadata",
"Instance metadata categories", "Spot Instance interruption notices", "EC2 instance
rebalance recommendations", "Scheduled events", "Instance identity documents"):

* PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds: 1..21600 -> 200,
  body = token (text/plain), TTL header echoed.  Missing/invalid TTL -> 400.
  PUT with an X-Forwarded-For header -> 403.  PUT to a version-specific token path
  (e.g. /2021-03-23/api/token) -> 403.  Any other method on the token path -> 405
  (Allow: OPTIONS, PUT), which is what the real service answers.
* GET/HEAD elsewhere: X-aws-ec2-metadata-token.  Tokens required: missing, unknown or
  expired token -> 401.  Tokens optional: no token is accepted (IMDSv1), but a token
  that is present and unknown/expired still -> 401.
* Everything is text/plain (JSON documents too); unknown resources -> 404.
  Directory resources list their entries one per line (sub-directories end in "/").

Control API (no token, JSON in/out, never logged, never faulted):

    POST   /_sim/spot-notice       {"action": "terminate"|"stop"|"hibernate",
                                    "in_seconds": 120} or {"action":..., "time": "...Z"}
    DELETE /_sim/spot-notice
    POST   /_sim/rebalance         {} or {"noticeTime": "...Z"}
    DELETE /_sim/rebalance
    POST   /_sim/lifecycle         {"state": "Terminated"}   (null -> item absent, 404)
    DELETE /_sim/lifecycle         item absent (404)
    POST   /_sim/scheduled-events  [ {event}, ... ]          (or {"events": [...]})
    DELETE /_sim/scheduled-events  back to []
    POST   /_sim/credentials       {"role": "r", "AccessKeyId": .., "SecretAccessKey": ..,
                                    "Token": .., "Expiration": "...Z", ...}  partial ok;
                                    "role": null removes the role
    POST   /_sim/identity          partial override, e.g. {"instanceId": .., "region": ..,
                                    "availabilityZone": .., "instanceType": ..}
    POST   /_sim/tokens            {"required": true|false}
    POST   /_sim/expire-tokens     every token issued so far becomes expired
    POST   /_sim/fault             {"path": "/latest/...", "status": 500, "count": 3}
                                   {"path": ..., "delay_ms": 1500, "count": 1}
                                   {"path": ..., "garbage": true, "count": 2}
                                   {"path": ..., "body": "raw text", "count": -1}
                                     (200 with exactly that body, for hostile-input tests)
                                   optional "method": "GET"|"PUT"|...; count -1 = forever
    GET    /_sim/fault             active faults
    DELETE /_sim/fault             clear all faults
    GET    /_sim/requests          [{"method","path","token","status","fault"}, ...]
    DELETE /_sim/requests
    GET    /_sim/state             current simulated state (debugging)
    POST   /_sim/reset             everything back to defaults (issued tokens stay valid)
    POST   /_sim/metadata-options  {"http_endpoint": "enabled"|"disabled",
                                    "hop_limit": 1..64, "hops": 1..64}  partial ok
        The instance's MetadataOptions and where the caller sits.  "hops" is
        how many network hops the caller is from the instance: 1 on the host,
        2 in a container on a bridge network.  The service sends its token PUT
        answers with an IP TTL of HttpPutResponseHopLimit, so when hops >
        hop_limit the answer dies on the way: the PUT gets no answer at all
        (the connection is held open, silent, until the caller gives up).
        GETs are not hop-limited.  http_endpoint disabled: every metadata
        request answers 403 (the service is turned off for the instance).
"""

import argparse
import ipaddress
import json
import os
import random
import re
import secrets
import signal
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN_PATH = "/latest/api/token"
TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
TTL_MIN, TTL_MAX = 1, 21600
SPOT_ACTIONS = ("terminate", "stop", "hibernate")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun",
          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
MAX_LOG = 200000


def iso_z(t):
    """UTC timestamp in the IMDS style: 2017-09-18T08:22:00Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def event_time(t):
    """Scheduled-event timestamp style from the docs: 21 Jan 2019 09:00:43 GMT."""
    g = time.gmtime(t)
    return "%d %s %d %02d:%02d:%02d GMT" % (
        g.tm_mday, MONTHS[g.tm_mon - 1], g.tm_year, g.tm_hour, g.tm_min, g.tm_sec)


def pretty(obj):
    # Matches the layout of the documented examples: "key" : value
    return json.dumps(obj, indent=2, separators=(",", " : "))


class BadRequest(Exception):
    pass


def _want_str(body, key, allow_none=False):
    v = body[key]
    if v is None and allow_none:
        return None
    if not isinstance(v, str) or not v:
        raise BadRequest("%r must be a non-empty string" % key)
    return v


def _want_obj(body):
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    return body


def _check_keys(body, allowed):
    extra = sorted(set(body) - set(allowed))
    if extra:
        raise BadRequest("unknown field(s): %s (allowed: %s)"
                         % (", ".join(extra), ", ".join(sorted(allowed))))


# --------------------------------------------------------------------------- state

class Sim:
    def __init__(self, tokens_required=True):
        self.lock = threading.Lock()
        self.default_tokens_required = tokens_required
        self.tokens = {}          # token -> monotonic expiry
        self.requests = []
        self.started = time.time()
        self.reset()

    # callers hold self.lock, except __init__
    def reset(self):
        now = time.time()
        self.tokens_required = self.default_tokens_required
        self.identity = {
            "accountId": "123456789012",
            "architecture": "x86_64",
            "availabilityZone": "us-east-1a",
            "imageId": "ami-0abcdef1234567890",
            "instanceId": "i-0123456789abcdef0",
            "instanceType": "g5.xlarge",
            "pendingTime": iso_z(self.started),
            "privateIp": "10.0.0.12",
            "region": "us-east-1",
            "version": "2017-09-30",
        }
        self.life_cycle = "spot"
        self.spot_notice = None        # {"action":..., "time":...}
        self.rebalance = None          # {"noticeTime":...}
        self.lifecycle_state = "InService"
        self.scheduled_events = []
        self.role = "spotguard-test-role"
        self.creds = {
            "Code": "Success",
            "LastUpdated": iso_z(now),
            "Type": "AWS-HMAC",
            "AccessKeyId": "ASIAIMDSSIMEXAMPLE01",
            "SecretAccessKey": "imdsSimFakeSecretKey/K7MDENG/bPxRfiCYEXAMPLE",
            "Token": "IQoJb3JpZ2luX2VjEImdsSimulatorFakeSessionToken//////////EXAMPLE==",
            "Expiration": iso_z(now + 6 * 3600),
        }
        self.faults = []
        self.requests = []
        self.http_endpoint = "enabled"
        self.hop_limit = 1   # the EC2 default for instances launched outside a template
        self.hops = 1        # the caller: on the host

    # -- tokens
    def issue_token(self, ttl):
        tok = "AQAEA" + secrets.token_urlsafe(42)
        self.tokens[tok] = time.monotonic() + ttl
        return tok

    def token_state(self, tok):
        """'none' | 'valid' | 'expired' | 'invalid', and remaining seconds if valid."""
        if tok is None:
            return "none", None
        exp = self.tokens.get(tok)
        if exp is None:
            return "invalid", None
        left = exp - time.monotonic()
        if left <= 0:
            return "expired", None
        return "valid", left

    def expire_tokens(self):
        now = time.monotonic()
        for tok in self.tokens:
            self.tokens[tok] = min(self.tokens[tok], now)

    # -- faults
    def take_fault(self, method, path):
        for f in self.faults:
            if not path.startswith(f["path"]):
                continue
            if f.get("method") and f["method"] != method:
                continue
            if f["count"] > 0:
                f["count"] -= 1
            fault = dict(f)
            if f["count"] == 0:
                self.faults.remove(f)
            return fault
        return None

    # -- metadata tree (dict = directory, str = leaf)
    def tree(self):
        ident = self.identity
        ip = ident["privateIp"]
        region = ident["region"]
        host = "ip-%s.%s" % (ip.replace(".", "-"),
                             "ec2.internal" if region == "us-east-1"
                             else region + ".compute.internal")
        md = {
            "ami-id": ident["imageId"],
            "ami-launch-index": "0",
            "ami-manifest-path": "(unknown)",
            "block-device-mapping": {"ami": "/dev/xvda", "root": "/dev/xvda"},
            "events": {"maintenance": {
                "scheduled": pretty(self.scheduled_events)
                if self.scheduled_events else "[]",
                "history": "[]",
            }},
            "hostname": host,
            "instance-action": "none",
            "instance-id": ident["instanceId"],
            "instance-life-cycle": self.life_cycle,
            "instance-type": ident["instanceType"],
            "local-hostname": host,
            "local-ipv4": ip,
            "mac": "0e:12:34:56:78:9a",
            "placement": {
                "availability-zone": ident["availabilityZone"],
                "region": region,
            },
            "reservation-id": "r-0123456789abcdef0",
            "security-groups": "spotguard-test-sg",
            "services": {"domain": "amazonaws.com", "partition": "aws"},
        }
        if self.rebalance is not None:
            md["events"]["recommendations"] = {
                "rebalance": json.dumps(self.rebalance)}
        if self.spot_notice is not None:
            spot = {"instance-action": json.dumps(self.spot_notice)}
            if self.spot_notice["action"] == "terminate":
                spot["termination-time"] = self.spot_notice["time"]
            md["spot"] = spot
        if self.lifecycle_state is not None:
            md["autoscaling"] = {"target-lifecycle-state": self.lifecycle_state}
        if self.role is not None:
            md["iam"] = {
                "info": pretty({
                    "Code": "Success",
                    "LastUpdated": self.creds.get("LastUpdated", iso_z(time.time())),
                    "InstanceProfileArn": "arn:aws:iam::%s:instance-profile/%s"
                                          % (ident["accountId"], self.role),
                    "InstanceProfileId": "AIPAIMDSSIMEXAMPLE01",
                }),
                "security-credentials": {self.role: pretty(self.creds)},
            }
        doc = {
            "accountId": ident["accountId"],
            "architecture": ident["architecture"],
            "availabilityZone": ident["availabilityZone"],
            "billingProducts": None,
            "devpayProductCodes": None,
            "marketplaceProductCodes": None,
            "imageId": ident["imageId"],
            "instanceId": ident["instanceId"],
            "instanceType": ident["instanceType"],
            "kernelId": None,
            "pendingTime": ident["pendingTime"],
            "privateIp": ip,
            "ramdiskId": None,
            "region": region,
            "version": ident["version"],
        }
        latest = {
            "meta-data": md,
            "dynamic": {"instance-identity": {"document": pretty(doc)}},
        }
        return {"latest": latest}

    def snapshot(self):
        return {
            "tokens_required": self.tokens_required,
            "identity": dict(self.identity, lifeCycle=self.life_cycle),
            "spot_notice": self.spot_notice,
            "rebalance": self.rebalance,
            "lifecycle_state": self.lifecycle_state,
            "scheduled_events": self.scheduled_events,
            "role": self.role,
            "credentials": self.creds,
            "faults": self.faults,
            "issued_tokens": len(self.tokens),
            "logged_requests": len(self.requests),
        }


def resolve(tree, path):
    """(status, body) for a GET of `path` in the metadata tree."""
    trailing = path.endswith("/") and path != "/"
    parts = path.strip("/").split("/") if path.strip("/") else []
    node = tree
    for p in parts:
        if not isinstance(node, dict) or p == "" or p not in node:
            return 404, None
        node = node[p]
    if isinstance(node, dict):
        names = sorted(k + "/" if isinstance(v, dict) else k for k, v in node.items())
        return 200, "\n".join(names)
    if trailing:
        return 404, None
    return 200, node


# --------------------------------------------------------------------------- control

def control(sim, method, path, raw):
    """Returns (status, obj)."""
    path = path.rstrip("/") or "/"

    def body(default=None):
        if not raw.strip():
            if default is None:
                raise BadRequest("a JSON body is required")
            return default
        try:
            return json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise BadRequest("invalid JSON: %s" % e)

    ok = {"ok": True}
    key = (method, path)
    now = time.time()

    if key == ("POST", "/_sim/spot-notice"):
        b = _want_obj(body({}))
        _check_keys(b, ("action", "in_seconds", "time"))
        action = b.get("action", "terminate")
        if action not in SPOT_ACTIONS:
            raise BadRequest("action must be one of %s" % ", ".join(SPOT_ACTIONS))
        if "time" in b:
            if "in_seconds" in b:
                raise BadRequest("give either time or in_seconds, not both")
            t = _want_str(b, "time")
            if not ISO_RE.match(t):
                raise BadRequest("time must look like 2026-11-22T08:22:00Z")
        else:
            secs = b.get("in_seconds", 120)
            if isinstance(secs, bool) or not isinstance(secs, (int, float)):
                raise BadRequest("in_seconds must be a number")
            t = iso_z(now + secs)
        with sim.lock:
            sim.spot_notice = {"action": action, "time": t}
        return 200, dict(ok, **{"action": action, "time": t})
    if key == ("DELETE", "/_sim/spot-notice"):
        with sim.lock:
            sim.spot_notice = None
        return 200, ok

    if key == ("POST", "/_sim/rebalance"):
        b = _want_obj(body({}))
        _check_keys(b, ("noticeTime", "in_seconds"))
        if "noticeTime" in b:
            t = _want_str(b, "noticeTime")
            if not ISO_RE.match(t):
                raise BadRequest("noticeTime must look like 2026-11-22T08:22:00Z")
        else:
            secs = b.get("in_seconds", 0)
            if isinstance(secs, bool) or not isinstance(secs, (int, float)):
                raise BadRequest("in_seconds must be a number")
            t = iso_z(now + secs)
        with sim.lock:
            sim.rebalance = {"noticeTime": t}
        return 200, dict(ok, noticeTime=t)
    if key == ("DELETE", "/_sim/rebalance"):
        with sim.lock:
            sim.rebalance = None
        return 200, ok

    if key == ("POST", "/_sim/lifecycle"):
        b = _want_obj(body())
        _check_keys(b, ("state",))
        if "state" not in b:
            raise BadRequest("'state' is required")
        st = _want_str(b, "state", allow_none=True)
        with sim.lock:
            sim.lifecycle_state = st
        return 200, ok
    if key == ("DELETE", "/_sim/lifecycle"):
        with sim.lock:
            sim.lifecycle_state = None
        return 200, ok

    if key == ("POST", "/_sim/scheduled-events"):
        b = body()
        if isinstance(b, dict) and set(b) == {"events"}:
            b = b["events"]
        if not isinstance(b, list):
            raise BadRequest("body must be a JSON list of event objects")
        events = []
        for i, ev in enumerate(b):
            if not isinstance(ev, dict):
                raise BadRequest("event %d is not an object" % i)
            nb = now + 86400 + 3600 * i
            full = {
                "NotBefore": event_time(nb),
                "Code": "system-reboot",
                "Description": "scheduled reboot",
                "EventId": "instance-event-%017x" % random.getrandbits(68),
                "NotAfter": event_time(nb + 1800),
                "State": "active",
            }
            full.update(ev)
            events.append(full)
        with sim.lock:
            sim.scheduled_events = events
        return 200, dict(ok, events=events)
    if key == ("DELETE", "/_sim/scheduled-events"):
        with sim.lock:
            sim.scheduled_events = []
        return 200, ok

    if key == ("POST", "/_sim/credentials"):
        b = _want_obj(body())
        fields = ("Code", "LastUpdated", "Type", "AccessKeyId",
                  "SecretAccessKey", "Token", "Expiration")
        _check_keys(b, ("role",) + fields)
        upd = {}
        for k in fields:
            if k in b:
                upd[k] = _want_str(b, k)
        for k in ("LastUpdated", "Expiration"):
            if k in upd and not ISO_RE.match(upd[k]):
                raise BadRequest("%s must look like 2026-11-22T08:22:00Z" % k)
        role = _want_str(b, "role", allow_none=True) if "role" in b else sim.role
        if role is not None and "/" in role:
            raise BadRequest("role must not contain '/'")
        with sim.lock:
            sim.role = role
            sim.creds.update(upd)
        return 200, ok

    if key == ("POST", "/_sim/identity"):
        b = _want_obj(body())
        alias = {
            "instance_id": "instanceId", "instanceId": "instanceId",
            "instance_type": "instanceType", "instanceType": "instanceType",
            "region": "region",
            "az": "availabilityZone", "availability_zone": "availabilityZone",
            "availabilityZone": "availabilityZone",
            "image_id": "imageId", "ami_id": "imageId", "imageId": "imageId",
            "account_id": "accountId", "accountId": "accountId",
            "private_ip": "privateIp", "privateIp": "privateIp",
            "architecture": "architecture", "pendingTime": "pendingTime",
            "life_cycle": "lifeCycle", "lifeCycle": "lifeCycle",
        }
        _check_keys(b, alias)
        upd = {}
        for k in b:
            upd[alias[k]] = _want_str(b, k)
        life = upd.pop("lifeCycle", None)
        if "region" in upd and "availabilityZone" not in upd:
            upd["availabilityZone"] = upd["region"] + "a"
        if "availabilityZone" in upd and "region" not in upd:
            az = upd["availabilityZone"]
            if len(az) < 2 or not az[-1].isalpha():
                raise BadRequest("cannot derive region from availabilityZone %r" % az)
            upd["region"] = az[:-1]
        if "region" in upd and not upd["availabilityZone"].startswith(upd["region"]):
            raise BadRequest("availabilityZone %r is not in region %r"
                             % (upd["availabilityZone"], upd["region"]))
        with sim.lock:
            sim.identity.update(upd)
            if life is not None:
                sim.life_cycle = life
        return 200, ok

    if key == ("POST", "/_sim/tokens"):
        b = _want_obj(body())
        _check_keys(b, ("required",))
        if not isinstance(b.get("required"), bool):
            raise BadRequest("'required' must be true or false")
        with sim.lock:
            sim.tokens_required = b["required"]
        return 200, ok
    if key == ("POST", "/_sim/expire-tokens"):
        with sim.lock:
            sim.expire_tokens()
        return 200, ok

    if key == ("POST", "/_sim/fault"):
        b = _want_obj(body())
        _check_keys(b, ("path", "status", "delay_ms", "garbage", "body", "count", "method"))
        p = b.get("path")
        if not isinstance(p, str) or not p.startswith("/"):
            raise BadRequest("'path' must be a string starting with '/'")
        f = {"path": p}
        if "method" in b:
            f["method"] = _want_str(b, "method").upper()
        if "status" in b:
            st = b["status"]
            if isinstance(st, bool) or not isinstance(st, int) or not 100 <= st <= 599:
                raise BadRequest("'status' must be an integer 100..599")
            f["status"] = st
        if "delay_ms" in b:
            d = b["delay_ms"]
            if isinstance(d, bool) or not isinstance(d, (int, float)) or d < 0:
                raise BadRequest("'delay_ms' must be a number >= 0")
            f["delay_ms"] = d
        if "garbage" in b:
            if not isinstance(b["garbage"], bool):
                raise BadRequest("'garbage' must be true or false")
            if b["garbage"]:
                f["garbage"] = True
        if "body" in b:
            if not isinstance(b["body"], str):
                raise BadRequest("'body' must be a string")
            f["body"] = b["body"]
        if sum(1 for k in ("status", "garbage", "body") if f.get(k)) > 1:
            raise BadRequest("'status', 'garbage' and 'body' are mutually exclusive")
        if not ("status" in f or "delay_ms" in f or f.get("garbage") or "body" in f):
            raise BadRequest("give at least one of status, delay_ms, garbage, body")
        c = b.get("count", 1)
        if isinstance(c, bool) or not isinstance(c, int) or not (c >= 1 or c == -1):
            raise BadRequest("'count' must be a positive integer or -1")
        f["count"] = c
        with sim.lock:
            sim.faults.append(f)
        return 200, ok
    if key == ("GET", "/_sim/fault"):
        with sim.lock:
            return 200, [dict(f) for f in sim.faults]
    if key == ("DELETE", "/_sim/fault"):
        with sim.lock:
            sim.faults = []
        return 200, ok

    if key == ("GET", "/_sim/requests"):
        with sim.lock:
            return 200, list(sim.requests)
    if key == ("DELETE", "/_sim/requests"):
        with sim.lock:
            sim.requests = []
        return 200, ok

    if key == ("GET", "/_sim/state"):
        with sim.lock:
            return 200, json.loads(json.dumps(sim.snapshot()))
    if key == ("POST", "/_sim/metadata-options"):
        b = _want_obj(body())
        _check_keys(b, ("http_endpoint", "hop_limit", "hops"))
        if "http_endpoint" in b and b["http_endpoint"] not in ("enabled", "disabled"):
            raise BadRequest("'http_endpoint' must be \"enabled\" or \"disabled\"")
        for k in ("hop_limit", "hops"):
            v = b.get(k, 1)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 64:
                raise BadRequest("%r must be an integer 1..64" % k)
        with sim.lock:
            sim.http_endpoint = b.get("http_endpoint", sim.http_endpoint)
            sim.hop_limit = b.get("hop_limit", sim.hop_limit)
            sim.hops = b.get("hops", sim.hops)
        return 200, ok
    if key == ("POST", "/_sim/reset"):
        with sim.lock:
            sim.reset()
        return 200, ok

    known = {"/_sim/spot-notice", "/_sim/rebalance", "/_sim/lifecycle",
             "/_sim/scheduled-events", "/_sim/credentials", "/_sim/identity",
             "/_sim/tokens", "/_sim/expire-tokens", "/_sim/fault",
             "/_sim/requests", "/_sim/state", "/_sim/reset", "/_sim/metadata-options"}
    if path in known:
        return 405, {"ok": False, "error": "method %s not allowed on %s" % (method, path)}
    return 404, {"ok": False, "error": "no such control endpoint: %s" % path}


# --------------------------------------------------------------------------- HTTP

def status_body(code):
    try:
        phrase = HTTPStatus(code).phrase
    except ValueError:
        phrase = "Error"
    return ("%d - %s\n" % (code, phrase)).encode()


def garbage_body(normal):
    if normal and len(normal) >= 2:
        return normal[: max(1, len(normal) // 2)] + b"\xff\xfe\x00garbage"
    return b'{"action": "termin\xff\xfe\x00' + os.urandom(8)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "EC2ws"
    sys_version = ""
    wbufsize = -1            # buffer header + body, flushed once per response

    def setup(self):
        super().setup()
        try:  # no Nagle: keep-alive clients must not wait for delayed ACKs
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def handle_expect_100(self):
        ok = super().handle_expect_100()
        self.wfile.flush()
        return ok

    def version_string(self):
        return self.server_version

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("imds_sim: %s - %s\n" % (self.address_string(), fmt % args))

    def _read_body(self):
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            chunks = []
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _send(self, code, body=b"", ctype="text/plain", headers=None, head=False):
        if isinstance(body, str):
            body = body.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head and body:
            self.wfile.write(body)
        self.wfile.flush()

    def _dispatch(self, method):
        try:
            raw = self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            self._send(400, status_body(400))
            return
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path.startswith("http://") or path.startswith("https://"):
            path = "/" + path.split("/", 3)[3] if path.count("/") >= 3 else "/"
        if path == "/_sim" or path.startswith("/_sim/"):
            try:
                code, obj = control(self.server.sim, method, path, raw)
            except BadRequest as e:
                code, obj = 400, {"ok": False, "error": str(e)}
            self._send(code, json.dumps(obj) + "\n", ctype="application/json",
                       head=(method == "HEAD"))
            return
        self._imds(method, path)

    def _imds(self, method, path):
        sim = self.server.sim
        tok = self.headers.get(TOKEN_HEADER)
        with sim.lock:
            disabled = sim.http_endpoint == "disabled"
            dropped = (method == "PUT" and path in (TOKEN_PATH, TOKEN_PATH + "/")
                       and sim.hops > sim.hop_limit)
            if len(sim.requests) < MAX_LOG and (disabled or dropped):
                sim.requests.append({"method": method, "path": path, "token": None,
                                     "status": 403 if disabled else None,
                                     "fault": "disabled" if disabled else "hop-limit"})
        if disabled:
            self._send(403, status_body(403))
            return
        if dropped:
            # The answer would die on the extra hop: say nothing until the
            # caller gives up and closes, or a minute has passed.
            self.close_connection = True
            self.connection.settimeout(60)
            try:
                while self.connection.recv(4096):
                    pass
            except OSError:
                pass
            return
        with sim.lock:
            fault = sim.take_fault(method, path)
        if fault and fault.get("delay_ms"):
            time.sleep(fault["delay_ms"] / 1000.0)
        with sim.lock:
            tstate, left = sim.token_state(tok)
        fault_kind = None
        if fault and "status" in fault:
            code, body, headers = fault["status"], status_body(fault["status"]), {}
            fault_kind = "status"
        else:
            code, body, headers = self._normal(method, path, tstate, left)
            if fault and fault.get("garbage"):
                code, body, headers = 200, garbage_body(body if code == 200 else b""), {}
                fault_kind = "garbage"
            elif fault and "body" in fault:
                code, body, headers = 200, fault["body"].encode("utf-8", "surrogatepass"), {}
                fault_kind = "body"
            elif fault:
                fault_kind = "delay"
        with sim.lock:
            if len(sim.requests) < MAX_LOG:
                sim.requests.append({"method": method, "path": path, "token": tstate,
                                     "status": code, "fault": fault_kind})
        self._send(code, body, headers=headers, head=(method == "HEAD"))

    def _normal(self, method, path, tstate, left):
        """(status, body bytes, headers) of the simulated IMDS, without faults."""
        sim = self.server.sim
        if path in (TOKEN_PATH, TOKEN_PATH + "/"):
            if method != "PUT":
                return 405, status_body(405), {"Allow": "OPTIONS, PUT"}
            if self.headers.get("X-Forwarded-For") is not None:
                return 403, status_body(403), {}
            ttl_s = (self.headers.get(TTL_HEADER) or "").strip()
            if not re.fullmatch(r"[0-9]{1,6}", ttl_s) or not TTL_MIN <= int(ttl_s) <= TTL_MAX:
                return 400, status_body(400), {}
            ttl = int(ttl_s)
            with sim.lock:
                token = sim.issue_token(ttl)
            return 200, token.encode(), {TTL_HEADER: str(ttl)}
        if method == "PUT" and re.fullmatch(r"/[^/]+/api/token/?", path):
            return 403, status_body(403), {}   # version-specific token path
        if method not in ("GET", "HEAD"):
            return 405, status_body(405), {"Allow": "GET, HEAD"}
        with sim.lock:
            if tstate in ("invalid", "expired") or (tstate == "none" and sim.tokens_required):
                return 401, status_body(401), {}
            tree = sim.tree()
        code, text = resolve(tree, path)
        if code != 200:
            return code, status_body(code), {}
        headers = {}
        if tstate == "valid":
            headers[TTL_HEADER] = str(max(0, int(left)))
        return 200, text.encode("utf-8"), headers

    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_POST(self):
        self._dispatch("POST")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_OPTIONS(self):
        self._dispatch("OPTIONS")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # Clients disconnecting mid-response are expected in fault tests.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def write_port_file(path, port):
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="EC2 IMDS simulator for tests")
    ap.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    ap.add_argument("--port", type=int, default=0, help="0 = ephemeral port")
    ap.add_argument("--port-file", help="write the bound port here (atomically)")
    ap.add_argument("--tokens", choices=("required", "optional"), default="required",
                    help="IMDSv2 only (required, default) or v1+v2 (optional)")
    ap.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    args = ap.parse_args(argv)

    if not is_loopback(args.host):
        ap.error("refusing to bind non-loopback address %r" % args.host)
    if not 0 <= args.port <= 65535:
        ap.error("bad port")

    host = "127.0.0.1" if args.host == "localhost" else args.host
    Server.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        srv = Server((host, args.port), Handler)
    except OSError as e:
        print("imds_sim: cannot bind %s:%d: %s" % (host, args.port, e), file=sys.stderr)
        return 1
    srv.sim = Sim(tokens_required=(args.tokens == "required"))
    srv.verbose = args.verbose
    port = srv.server_address[1]

    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1},
                         name="imds-sim", daemon=True)
    t.start()
    if args.port_file:
        write_port_file(args.port_file, port)
    shown = "[%s]" % host if ":" in host else host
    print("listening on %s:%d" % (shown, port), file=sys.stderr, flush=True)

    while not stop.wait(0.5):
        pass
    srv.shutdown()
    srv.server_close()
    if args.port_file:
        try:
            os.unlink(args.port_file)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

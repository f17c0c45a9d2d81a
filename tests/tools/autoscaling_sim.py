#!/usr/bin/env python3
"""EC2 Auto Scaling query API simulator for spotguard integration tests.

Stdlib only (Python 3.7+).  Serves the three Auto Scaling actions spotguard
calls, as the Auto Scaling API reference (version 2011-01-01) describes them,
on a loopback address:

    autoscaling_sim.py [--host 127.0.0.1] [--port 0] [--port-file FILE]
                       [--region us-east-1] [--access-key AK] [--secret-key SK]
                       [--verbose]

Every API request must be a POST to "/" with a form-encoded body
(Content-Type application/x-www-form-urlencoded) holding Action and
Version=2011-01-01, signed with AWS Signature Version 4:

* no Authorization header -> 403 MissingAuthenticationToken;
* an Authorization header that is not "AWS4-HMAC-SHA256 Credential=AK/DAY/REGION/
  SERVICE/aws4_request, SignedHeaders=..., Signature=<64 hex>", no X-Amz-Date, a
  scope day that is not the X-Amz-Date day, or signed headers without host and
  x-amz-date -> 400 IncompleteSignature;
* an unknown access key -> 403 InvalidClientTokenId;
* a scope whose service is not "autoscaling" or whose region is not --region,
  or a signature that does not match (recomputed with --secret-key) -> 403
  SignatureDoesNotMatch;
* X-Amz-Date more than 15 minutes from the simulator's clock -> 400 RequestExpired.

Actions (parameters are checked: required ones present, no unknown ones,
integers where integers belong; any problem -> 400 ValidationError):

* DescribeAutoScalingInstances  InstanceIds.member.N (unknown ids are ignored,
  as the service does); MaxRecords, NextToken accepted.
* UpdateAutoScalingGroup  AutoScalingGroupName, MinSize, MaxSize, DesiredCapacity;
  the desired capacity must lie within min and max.
* CompleteLifecycleAction  AutoScalingGroupName, LifecycleHookName,
  LifecycleActionResult (CONTINUE|ABANDON), InstanceId or LifecycleActionToken;
  the hook must exist and the instance must be waiting ("...:Wait"), after which
  it moves to "...:Proceed".
* anything else -> 400 InvalidAction.

An unknown group -> 400 ValidationError "AutoScalingGroup name not found - NAME".
Errors are <ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/>.

Control API (no signature, JSON in/out, never faulted):

    POST   /_sim/groups   {"name": "asg", "min": 1, "max": 1, "desired": 1,
                           "hooks": ["drain"], "instances": {"i-1": "InService"}}
                          (adds or replaces the group)
    GET    /_sim/groups   {"asg": {...}, ...}
    POST   /_sim/fault    {"action": "UpdateAutoScalingGroup" | "*", "status": 503,
                           "code": "ServiceUnavailable", "count": 1}
    DELETE /_sim/fault
    GET    /_sim/calls    [{"action", "params", "status", "code", "access_key",
                            "region", "service", "signed_headers"}, ...]
    DELETE /_sim/calls
    POST   /_sim/reset    no groups, faults or calls
"""

import argparse
import datetime
import hashlib
import hmac
import json
import os
import re
import signal
import socket
import sys
import threading
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "2011-01-01"
XMLNS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"

AUTH_RE = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<ak>[^/\s]+)/(?P<day>\d{8})/(?P<region>[^/\s]+)/"
    r"(?P<service>[^/\s]+)/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;\-]+), ?"
    r"Signature=(?P<sig>[0-9a-f]{64})$")

ACTIONS = {
    # action: (required, optional, integer parameters)
    "DescribeAutoScalingInstances": (set(), {"MaxRecords", "NextToken"}, {"MaxRecords"}),
    "UpdateAutoScalingGroup": (
        {"AutoScalingGroupName"},
        {"MinSize", "MaxSize", "DesiredCapacity", "DefaultCooldown", "HealthCheckGracePeriod",
         "HealthCheckType", "LaunchConfigurationName", "VPCZoneIdentifier"},
        {"MinSize", "MaxSize", "DesiredCapacity", "DefaultCooldown", "HealthCheckGracePeriod"}),
    "CompleteLifecycleAction": (
        {"AutoScalingGroupName", "LifecycleHookName", "LifecycleActionResult"},
        {"InstanceId", "LifecycleActionToken"}, set()),
}


class ApiError(Exception):
    def __init__(self, status, code, message, kind="Sender"):
        super().__init__(message)
        self.status, self.code, self.message, self.kind = status, code, message, kind


def xml_escape(s):
    return (str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def uri_encode(s, keep_slash):
    safe = "-._~" + ("/" if keep_slash else "")
    return urllib.parse.quote(s, safe=safe)


def camel(name):
    return name[0].lower() + name[1:]


class Sim:
    def __init__(self, region, access_key, secret_key):
        self.lock = threading.Lock()
        self.region, self.access_key, self.secret_key = region, access_key, secret_key
        self.reset()

    def reset(self):
        self.groups = {}
        self.faults = []
        self.calls = []

    # --- signature -------------------------------------------------------

    def check_signature(self, method, path, query, headers, body, service="autoscaling",
                        region=None):
        """Returns (access_key, region, service, signed_headers) or raises ApiError."""
        region = region or self.region
        auth = headers.get("Authorization")
        if not auth:
            raise ApiError(403, "MissingAuthenticationToken",
                           "Request is missing Authentication Token")
        m = AUTH_RE.match(auth.strip())
        if not m:
            raise ApiError(400, "IncompleteSignature",
                           "Authorization header requires Credential, SignedHeaders and "
                           "Signature parameters")
        amz_date = headers.get("X-Amz-Date", "")
        if not re.match(r"^\d{8}T\d{6}Z$", amz_date):
            raise ApiError(400, "IncompleteSignature", "X-Amz-Date header missing or malformed")
        if amz_date[:8] != m["day"]:
            raise ApiError(400, "IncompleteSignature",
                           "Credential date %s does not match X-Amz-Date %s"
                           % (m["day"], amz_date))
        signed = m["signed"].split(";")
        if "host" not in signed or "x-amz-date" not in signed or signed != sorted(signed):
            raise ApiError(400, "IncompleteSignature",
                           "SignedHeaders must be sorted and include host and x-amz-date")
        if m["ak"] != self.access_key:
            raise ApiError(403, "InvalidClientTokenId",
                           "The security token included in the request is invalid.")
        if m["service"] != service:
            raise ApiError(403, "SignatureDoesNotMatch",
                           "Credential should be scoped to correct service: '%s'." % service)
        if m["region"] != region:
            raise ApiError(403, "SignatureDoesNotMatch",
                           "Credential should be scoped to a valid region, not '%s'."
                           % m["region"])
        sent = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc)
        now = datetime.datetime.now(datetime.timezone.utc)
        if abs((now - sent).total_seconds()) > 15 * 60:
            raise ApiError(400, "RequestExpired",
                           "Request has expired: X-Amz-Date %s, server time %s"
                           % (amz_date, now.strftime("%Y%m%dT%H%M%SZ")))
        payload_hash = hashlib.sha256(body).hexdigest()
        declared = headers.get("X-Amz-Content-Sha256")
        if declared is not None and declared != payload_hash:
            raise ApiError(400, "InvalidRequest", "x-amz-content-sha256 does not match the body")
        canonical_headers = ""
        for name in signed:
            values = headers.get_all(name)
            if values is None:
                raise ApiError(400, "IncompleteSignature", "signed header %s is missing" % name)
            value = ",".join(" ".join(v.strip().split()) for v in values)
            canonical_headers += "%s:%s\n" % (name, value)
        pairs = sorted((uri_encode(k, False), uri_encode(v, False))
                       for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True))
        canonical_query = "&".join("%s=%s" % kv for kv in pairs)
        canonical = "\n".join([method, uri_encode(urllib.parse.unquote(path), True),
                               canonical_query, canonical_headers, m["signed"], payload_hash])
        scope = "%s/%s/%s/aws4_request" % (m["day"], m["region"], m["service"])
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        key = ("AWS4" + self.secret_key).encode()
        for part in (m["day"], m["region"], m["service"], "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, m["sig"]):
            raise ApiError(403, "SignatureDoesNotMatch",
                           "The request signature we calculated does not match the signature "
                           "you provided.")
        return m["ak"], m["region"], m["service"], m["signed"]

    # --- actions ---------------------------------------------------------

    def take_fault(self, action):
        for f in self.faults:
            if f["action"] in (action, "*") and f["count"] != 0:
                if f["count"] > 0:
                    f["count"] -= 1
                raise ApiError(f["status"], f["code"], "injected fault",
                               "Receiver" if f["status"] >= 500 else "Sender")

    def group(self, name):
        g = self.groups.get(name)
        if g is None:
            raise ApiError(400, "ValidationError", "AutoScalingGroup name not found - %s" % name)
        return g

    def validate(self, action, params):
        if action not in ACTIONS:
            raise ApiError(400, "InvalidAction",
                           "Could not find operation %s for version %s" % (action, VERSION))
        required, optional, integers = ACTIONS[action]
        for name in sorted(required):
            if not params.get(name):
                raise ApiError(400, "ValidationError",
                               "1 validation error detected: Value null at '%s' failed to "
                               "satisfy constraint: Member must not be null" % camel(name))
        for name, value in params.items():
            member = action == "DescribeAutoScalingInstances" and re.match(
                r"^InstanceIds\.member\.[1-9]\d*$", name)
            if name not in required and name not in optional and not member:
                raise ApiError(400, "ValidationError", "Unknown parameter %s" % name)
            if name in integers and not re.match(r"^\d+$", value):
                raise ApiError(400, "ValidationError",
                               "Value '%s' at '%s' is not a non-negative integer"
                               % (value, camel(name)))

    def describe_instances(self, params):
        ids = [v for k, v in sorted(params.items()) if k.startswith("InstanceIds.member.")]
        if len(ids) > 50:
            raise ApiError(400, "ValidationError", "At most 50 instance ids are allowed")
        for i in ids:
            if not 1 <= len(i) <= 19:
                raise ApiError(400, "ValidationError",
                               "Value '%s' at 'instanceIds' failed to satisfy constraint: "
                               "Member must have length less than or equal to 19" % i)
        members = ""
        for name, g in sorted(self.groups.items()):
            for iid, state in sorted(g["instances"].items()):
                if ids and iid not in ids:
                    continue
                members += (
                    "<member><InstanceId>%s</InstanceId><InstanceType>m5.large</InstanceType>"
                    "<AutoScalingGroupName>%s</AutoScalingGroupName>"
                    "<AvailabilityZone>%sa</AvailabilityZone><LifecycleState>%s</LifecycleState>"
                    "<HealthStatus>HEALTHY</HealthStatus>"
                    "<ProtectedFromScaleIn>false</ProtectedFromScaleIn></member>"
                    % (xml_escape(iid), xml_escape(name), xml_escape(self.region),
                       xml_escape(state)))
        return ("<DescribeAutoScalingInstancesResult><AutoScalingInstances>%s"
                "</AutoScalingInstances></DescribeAutoScalingInstancesResult>" % members)

    def update_group(self, params):
        g = self.group(params["AutoScalingGroupName"])
        new = dict(g)
        for p, k in (("MinSize", "min"), ("MaxSize", "max"), ("DesiredCapacity", "desired")):
            if p in params:
                new[k] = int(params[p])
        if new["min"] > new["max"]:
            raise ApiError(400, "ValidationError",
                           "Max size:%d must be above Min size:%d" % (new["max"], new["min"]))
        if "DesiredCapacity" in params or "MinSize" in params or "MaxSize" in params:
            if not new["min"] <= new["desired"] <= new["max"]:
                raise ApiError(400, "ValidationError",
                               "Desired capacity:%d must be between the specified min size:%d "
                               "and max size:%d" % (new["desired"], new["min"], new["max"]))
        g.update(new)
        return ""

    def complete_lifecycle_action(self, params):
        g = self.group(params["AutoScalingGroupName"])
        hook = params["LifecycleHookName"]
        result = params["LifecycleActionResult"]
        if result not in ("CONTINUE", "ABANDON"):
            raise ApiError(400, "ValidationError",
                           "LifecycleActionResult must be CONTINUE or ABANDON, not '%s'" % result)
        instance = params.get("InstanceId")
        if not instance and not params.get("LifecycleActionToken"):
            raise ApiError(400, "ValidationError",
                           "Either InstanceId or LifecycleActionToken must be given")
        if hook not in g["hooks"]:
            raise ApiError(400, "ValidationError",
                           "No Lifecycle Hook found with name %s for group %s"
                           % (hook, params["AutoScalingGroupName"]))
        state = g["instances"].get(instance, "")
        if not state.endswith(":Wait"):
            raise ApiError(400, "ValidationError",
                           "No active Lifecycle Action found with instance ID %s" % instance)
        g["instances"][instance] = state[:-len("Wait")] + "Proceed"
        g.setdefault("completed", []).append(
            {"hook": hook, "instance": instance, "result": result})
        return "<CompleteLifecycleActionResult/>"

    def run(self, action, params):
        self.validate(action, params)
        self.take_fault(action)
        if action == "DescribeAutoScalingInstances":
            return self.describe_instances(params)
        if action == "UpdateAutoScalingGroup":
            return self.update_group(params)
        return self.complete_lifecycle_action(params)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "autoscaling-sim"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("autoscaling_sim: " + (fmt % args) + "\n")

    def _reply(self, status, body, content_type):
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _json(self, status, obj):
        self._reply(status, json.dumps(obj, indent=1), "application/json")

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _control(self, method, path, body):
        sim = self.server.sim
        with sim.lock:
            if path == "/_sim/groups" and method == "POST":
                g = json.loads(body or b"{}")
                if not g.get("name"):
                    return self._json(400, {"error": "name is required"})
                sim.groups[g["name"]] = {
                    "min": int(g.get("min", 1)), "max": int(g.get("max", 1)),
                    "desired": int(g.get("desired", 1)), "hooks": list(g.get("hooks", [])),
                    "instances": dict(g.get("instances", {})), "completed": []}
                return self._json(200, sim.groups[g["name"]])
            if path == "/_sim/groups" and method == "GET":
                return self._json(200, sim.groups)
            if path == "/_sim/fault" and method == "POST":
                f = json.loads(body or b"{}")
                sim.faults.append({"action": f.get("action", "*"),
                                   "status": int(f.get("status", 503)),
                                   "code": f.get("code", "ServiceUnavailable"),
                                   "count": int(f.get("count", 1))})
                return self._json(200, sim.faults)
            if path == "/_sim/fault" and method == "DELETE":
                sim.faults = []
                return self._json(200, [])
            if path == "/_sim/calls" and method == "GET":
                return self._json(200, sim.calls)
            if path == "/_sim/calls" and method == "DELETE":
                sim.calls = []
                return self._json(200, [])
            if path == "/_sim/reset" and method == "POST":
                sim.reset()
                return self._json(200, {})
        return self._json(404, {"error": "no control endpoint %s %s" % (method, path)})

    def _api(self, method, path, query, body):
        sim = self.server.sim
        call = {"action": None, "params": {}, "status": 200, "code": None, "access_key": None,
                "region": None, "service": None, "signed_headers": None}
        request_id = str(uuid.uuid4())
        try:
            if method != "POST" or path != "/":
                raise ApiError(400, "InvalidAction",
                               "this simulator serves only POST / (got %s %s)" % (method, path))
            ctype = self.headers.get("Content-Type", "")
            if not ctype.startswith("application/x-www-form-urlencoded"):
                raise ApiError(400, "ValidationError",
                               "Content-Type must be application/x-www-form-urlencoded, not '%s'"
                               % ctype)
            try:
                pairs = urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True,
                                               strict_parsing=bool(body))
            except (UnicodeDecodeError, ValueError) as e:
                raise ApiError(400, "MalformedQueryString", "the body is not a form: %s" % e)
            params = {}
            for k, v in pairs:
                if k in params:
                    raise ApiError(400, "ValidationError", "parameter %s given twice" % k)
                params[k] = v
            call["action"] = params.pop("Action", None)
            version = params.pop("Version", None)
            call["params"] = params
            ak, region, service, signed = sim.check_signature(method, path, query, self.headers,
                                                              body)
            call.update(access_key=ak, region=region, service=service, signed_headers=signed)
            if not call["action"]:
                raise ApiError(400, "MissingAction", "Action is missing")
            if version != VERSION:
                raise ApiError(400, "InvalidParameterValue",
                               "Version must be %s, not %r" % (VERSION, version))
            with sim.lock:
                result = sim.run(call["action"], params)
            xml = ('<?xml version="1.0"?>\n<%sResponse xmlns="%s">%s<ResponseMetadata>'
                   "<RequestId>%s</RequestId></ResponseMetadata></%sResponse>\n"
                   % (call["action"], XMLNS, result, request_id, call["action"]))
            status = 200
        except ApiError as e:
            call["status"], call["code"] = e.status, e.code
            xml = ('<?xml version="1.0"?>\n<ErrorResponse xmlns="%s"><Error><Type>%s</Type>'
                   "<Code>%s</Code><Message>%s</Message></Error><RequestId>%s</RequestId>"
                   "</ErrorResponse>\n"
                   % (XMLNS, e.kind, xml_escape(e.code), xml_escape(e.message), request_id))
            status = e.status
        with sim.lock:
            sim.calls.append(call)
        self._reply(status, xml, "text/xml")

    def _dispatch(self, method):
        url = urllib.parse.urlsplit(self.path)
        body = self._body()
        if url.path.startswith("/_sim/"):
            return self._control(method, url.path, body)
        return self._api(method, url.path, url.query, body)

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def write_port_file(path, port):
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="EC2 Auto Scaling query API simulator for tests")
    ap.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    ap.add_argument("--port", type=int, default=0, help="0 = ephemeral port")
    ap.add_argument("--port-file", help="write the bound port here (atomically)")
    ap.add_argument("--region", default="us-east-1", help="the region requests must be signed for")
    ap.add_argument("--access-key", default="AKIDAUTOSCALINGSIM", help="the accepted access key")
    ap.add_argument("--secret-key", default="autoscaling-sim-secret",
                    help="its secret, to check signatures")
    ap.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    args = ap.parse_args(argv)
    if args.host not in ("127.0.0.1", "::1", "localhost"):
        ap.error("refusing to bind non-loopback address %r" % args.host)

    host = "127.0.0.1" if args.host == "localhost" else args.host
    Server.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        srv = Server((host, args.port), Handler)
    except OSError as e:
        print("autoscaling_sim: cannot bind %s:%d: %s" % (host, args.port, e), file=sys.stderr)
        return 1
    srv.sim = Sim(args.region, args.access_key, args.secret_key)
    srv.verbose = args.verbose

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    t.start()
    if args.port_file:
        write_port_file(args.port_file, srv.server_address[1])
    else:
        print(srv.server_address[1], flush=True)
    stop.wait()
    srv.shutdown()
    srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

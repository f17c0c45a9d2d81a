#!/usr/bin/env python3
"""EC2 spot price history and AWS Price List simulator for spotguard tests.

Stdlib only (Python 3.7+).  Serves the two calls the agent makes at start to
price its instance, as the EC2 API reference (version 2016-11-15) and the
Price List query API reference describe them, on a loopback address:

    prices_sim.py [--host 127.0.0.1] [--port 0] [--port-file FILE]
                  [--region us-east-1] [--pricing-region us-east-1]
                  [--access-key AK] [--secret-key SK] [--verbose]

A request with an X-Amz-Target header is a Price List call, any other an EC2
call.  Both must be a POST to "/" signed with AWS Signature Version 4, checked
as autoscaling_sim.py checks it (the scope's service and region, the
signature recomputed with --secret-key, X-Amz-Date within 15 minutes).

* EC2: a form body (application/x-www-form-urlencoded) with
  Action=DescribeSpotPriceHistory and Version=2016-11-15, signed for service
  "ec2" in --region.  Parameters InstanceType.N (a type name),
  ProductDescription.N (Linux/UNIX, Windows, ...), AvailabilityZone,
  StartTime and EndTime (ISO 8601 UTC, StartTime <= EndTime), MaxResults,
  NextToken, DryRun, Filter.*: an unknown parameter -> 400 UnknownParameter, a
  bad value -> 400 InvalidParameterValue, another action -> 400 InvalidAction.
  The answer lists, per type and zone asked for, the prices in effect between
  StartTime and EndTime (the last change before StartTime included), newest
  first, as spotPriceHistorySet/item elements.  The simulator's prices are
  Linux/UNIX ones.  Errors are <Response><Errors><Error><Code/><Message/>
  </Error></Errors><RequestID/></Response>.
* Price List: X-Amz-Target AWSPriceListService.GetProducts, Content-Type
  application/x-amz-json-1.1, signed for service "pricing" in
  --pricing-region.  Body: ServiceCode, Filters [{"Type": "TERM_MATCH",
  "Field", "Value"}] (non-empty strings), FormatVersion (aws_v1),
  MaxResults (1-100), NextToken; anything else -> 400
  InvalidParameterException.  The answer's PriceList holds the products whose
  attributes match every filter, each a JSON document in a string.  For each
  on-demand price set, the products are the Linux one (operatingSystem Linux,
  tenancy Shared, preInstalledSw NA, capacitystatus Used) and, at half the
  price, one for each of those attributes (and regionCode) with another
  value: a client that leaves out a filter gets a wrong price.  Errors are
  {"__type": CODE, "message": ...} with the header x-amzn-ErrorType; the
  signature errors under their JSON names (InvalidSignatureException,
  UnrecognizedClientException, IncompleteSignatureException,
  MissingAuthenticationTokenException).

Control API (no signature, JSON in/out, never faulted):

    POST   /_sim/prices  {"spot": [{"instance_type", "availability_zone", "price",
                                    "timestamp" (default: an hour ago)}],
                          "on_demand": [{"instance_type", "region", "price"}]}  (adds)
    GET    /_sim/prices
    POST   /_sim/fault   {"action": "DescribeSpotPriceHistory" | "GetProducts" | "*",
                          "status": 503, "code": "Unavailable", "count": 1}
    DELETE /_sim/fault
    GET    /_sim/calls   [{"service", "action", "params", "status", "code",
                           "access_key", "region"}, ...]
    DELETE /_sim/calls
    POST   /_sim/reset   no prices, faults or calls
"""

import argparse
import datetime
import hashlib
import json
import re
import signal
import socket
import sys
import threading
import urllib.parse
import uuid

import autoscaling_sim as asg

EC2_VERSION = "2016-11-15"
EC2_XMLNS = "http://ec2.amazonaws.com/doc/%s/" % EC2_VERSION
TARGET = "AWSPriceListService.GetProducts"
LINUX = "Linux/UNIX"
PRODUCTS = {LINUX, "Linux/UNIX (Amazon VPC)", "SUSE Linux", "Red Hat Enterprise Linux",
            "Windows", "Windows (Amazon VPC)"}
TYPE_RE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")
SPOT_PARAMS = {"AvailabilityZone", "StartTime", "EndTime", "MaxResults", "NextToken", "DryRun"}
# The Linux on-demand product, and for each attribute a value the agent's
# filters must leave out.
LINUX_ATTRS = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
               "capacitystatus": "Used"}
DECOYS = [("operatingSystem", "Windows"), ("tenancy", "Dedicated"),
          ("preInstalledSw", "SQL Web"), ("capacitystatus", "UnusedCapacityReservation"),
          ("regionCode", None)]
JSON_CODES = {"SignatureDoesNotMatch": "InvalidSignatureException",
              "InvalidClientTokenId": "UnrecognizedClientException",
              "IncompleteSignature": "IncompleteSignatureException",
              "MissingAuthenticationToken": "MissingAuthenticationTokenException"}


def parse_time(value, name):
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z$", value or "")
    if not m:
        raise asg.ApiError(400, "InvalidParameterValue",
                           "Value (%s) for parameter %s is invalid." % (value, name))
    return datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc)


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def now():
    return datetime.datetime.now(datetime.timezone.utc)


def product(itype, region, attrs, price):
    sku = hashlib.sha1(json.dumps([itype, region, attrs], sort_keys=True).encode()).hexdigest()
    sku = sku[:16].upper()
    term = sku + ".JRTCKXETXF"
    return {"product": {"productFamily": "Compute Instance", "sku": sku,
                        "attributes": dict(attrs, instanceType=itype, regionCode=region,
                                           servicecode="AmazonEC2")},
            "serviceCode": "AmazonEC2", "version": "20261101000000",
            "publicationDate": "2026-11-01T00:00:00Z",
            "terms": {"OnDemand": {term: {
                "offerTermCode": "JRTCKXETXF", "sku": sku, "termAttributes": {},
                "effectiveDate": "2026-11-01T00:00:00Z",
                "priceDimensions": {term + ".6YS6EN2CT7": {
                    "rateCode": term + ".6YS6EN2CT7", "unit": "Hrs", "beginRange": "0",
                    "endRange": "Inf", "description": "$%.4f per On Demand %s hour" % (price, itype),
                    "pricePerUnit": {"USD": "%.10f" % price}}}}}}}


class PriceSim(asg.Sim):
    def __init__(self, region, pricing_region, access_key, secret_key):
        self.pricing_region = pricing_region
        super().__init__(region, access_key, secret_key)

    def reset(self):
        self.spot = {}       # (type, zone) -> [(time, price)]
        self.on_demand = {}  # (type, region) -> price
        self.faults = []
        self.calls = []
        self.groups = {}  # autoscaling_sim's control paths, unused here

    def set_prices(self, body):
        for e in body.get("spot", []):
            # Default: an hour ago (a price in effect now, whatever the
            # second a request's StartTime truncates to).
            t = parse_time(e["timestamp"], "timestamp") if e.get("timestamp") else \
                now().replace(microsecond=0) - datetime.timedelta(hours=1)
            key = (e["instance_type"], e["availability_zone"])
            self.spot.setdefault(key, []).append((t, float(e["price"])))
        for e in body.get("on_demand", []):
            self.on_demand[(e["instance_type"], e["region"])] = float(e["price"])

    def prices(self):
        return {"spot": [{"instance_type": k[0], "availability_zone": k[1], "price": p,
                          "timestamp": iso(t)} for k, h in sorted(self.spot.items()) for t, p in h],
                "on_demand": [{"instance_type": k[0], "region": k[1], "price": p}
                              for k, p in sorted(self.on_demand.items())]}

    # --- EC2 ---------------------------------------------------------------

    def spot_price_history(self, params):
        types, products = [], []
        for k, v in params.items():
            if re.match(r"^InstanceType\.[1-9]\d*$", k):
                types.append(v)
            elif re.match(r"^ProductDescription\.[1-9]\d*$", k):
                products.append(v)
            elif k not in SPOT_PARAMS and not k.startswith("Filter."):
                raise asg.ApiError(400, "UnknownParameter",
                                   "The parameter %s is not recognized" % k)
        for t in types:
            if not TYPE_RE.match(t):
                raise asg.ApiError(400, "InvalidParameterValue",
                                   "Invalid value '%s' for InstanceType." % t)
        for p in products:
            if p not in PRODUCTS:
                raise asg.ApiError(400, "InvalidParameterValue",
                                   "Invalid value '%s' for ProductDescription." % p)
        start = parse_time(params["StartTime"], "StartTime") if "StartTime" in params else None
        end = parse_time(params["EndTime"], "EndTime") if "EndTime" in params else now()
        if start is not None and start > end:
            raise asg.ApiError(400, "InvalidParameterValue", "StartTime must be before EndTime")
        zone = params.get("AvailabilityZone")
        items = ""
        for (itype, z), history in sorted(self.spot.items()):
            if (types and itype not in types) or (zone and z != zone) or \
                    (products and LINUX not in products):
                continue
            h = sorted(e for e in history if e[0] <= end)
            chosen = [e for e in h if start is None or e[0] >= start]
            chosen += [e for e in h if start is not None and e[0] < start][-1:]
            for t, price in sorted(chosen, reverse=True):
                items += ("<item><instanceType>%s</instanceType><productDescription>%s"
                          "</productDescription><spotPrice>%.6f</spotPrice><timestamp>%s"
                          "</timestamp><availabilityZone>%s</availabilityZone></item>"
                          % (asg.xml_escape(itype), LINUX, price, iso(t), asg.xml_escape(z)))
        return "<spotPriceHistorySet>%s</spotPriceHistorySet><nextToken/>" % items

    # --- Price List --------------------------------------------------------

    def products(self):
        out = []
        for (itype, region), price in sorted(self.on_demand.items()):
            out.append(product(itype, region, LINUX_ATTRS, price))
            for field, value in DECOYS:
                if field == "regionCode":
                    other = "eu-west-1" if region != "eu-west-1" else "us-west-2"
                    out.append(product(itype, other, LINUX_ATTRS, price / 2))
                else:
                    out.append(product(itype, region, dict(LINUX_ATTRS, **{field: value}),
                                       price / 2))
        return out

    def get_products(self, req):
        def invalid(message):
            return asg.ApiError(400, "InvalidParameterException", message)
        if not isinstance(req, dict):
            raise invalid("the body is not a JSON object")
        for k in req:
            if k not in ("ServiceCode", "Filters", "FormatVersion", "MaxResults", "NextToken"):
                raise invalid("Unknown parameter %s" % k)
        if not isinstance(req.get("ServiceCode"), str) or not req["ServiceCode"]:
            raise invalid("ServiceCode is required")
        if req.get("FormatVersion", "aws_v1") != "aws_v1":
            raise invalid("FormatVersion must be aws_v1")
        limit = req.get("MaxResults", 100)
        if not isinstance(limit, int) or not 1 <= limit <= 100:
            raise invalid("MaxResults must be an integer from 1 to 100")
        filters = req.get("Filters", [])
        for i, f in enumerate(filters if isinstance(filters, list) else [None], 1):
            ok = isinstance(f, dict) and set(f) == {"Type", "Field", "Value"}
            if not ok or f["Type"] != "TERM_MATCH":
                raise invalid("Filters.%d must be {Type: TERM_MATCH, Field, Value}" % i)
            for key in ("Field", "Value"):
                if not isinstance(f[key], str) or not f[key]:
                    raise invalid("1 validation error detected: Value at 'filters.%d.member.%s' "
                                  "failed to satisfy constraint: Member must have length "
                                  "greater than or equal to 1" % (i, key.lower()))
        found = [p for p in self.products() if req["ServiceCode"] == "AmazonEC2" and
                 all(p["product"]["attributes"].get(f["Field"]) == f["Value"] for f in filters)]
        return {"FormatVersion": "aws_v1", "PriceList": [json.dumps(p) for p in found[:limit]]}


class Handler(asg.Handler):
    server_version = "prices-sim"

    def _control(self, method, path, body):
        sim = self.server.sim
        with sim.lock:
            if path == "/_sim/prices" and method == "POST":
                try:
                    sim.set_prices(json.loads(body or b"{}"))
                except (KeyError, ValueError, asg.ApiError) as e:
                    return self._json(400, {"error": "bad prices: %s" % e})
                return self._json(200, sim.prices())
            if path == "/_sim/prices" and method == "GET":
                return self._json(200, sim.prices())
        return super()._control(method, path, body)

    def _ec2(self, body, call):
        sim = self.server.sim
        ctype = self.headers.get("Content-Type", "")
        if not ctype.startswith("application/x-www-form-urlencoded"):
            raise asg.ApiError(400, "InvalidParameterValue",
                               "Content-Type must be application/x-www-form-urlencoded, not '%s'"
                               % ctype)
        try:
            pairs = urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True,
                                           strict_parsing=bool(body))
        except (UnicodeDecodeError, ValueError) as e:
            raise asg.ApiError(400, "MalformedQueryString", "the body is not a form: %s" % e)
        params = dict(pairs)
        call["action"] = params.pop("Action", None)
        version = params.pop("Version", None)
        call["params"] = params
        self._sign(call, body, "ec2", sim.region)
        if call["action"] != "DescribeSpotPriceHistory":
            raise asg.ApiError(400, "InvalidAction",
                               "The action %s is not valid for this web service." % call["action"])
        if version != EC2_VERSION:
            raise asg.ApiError(400, "InvalidParameterValue", "Version must be %s" % EC2_VERSION)
        with sim.lock:
            result = sim.spot_price_history(params)
            sim.take_fault(call["action"])
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<DescribeSpotPriceHistoryResponse '
                'xmlns="%s"><requestId>%s</requestId>%s</DescribeSpotPriceHistoryResponse>\n'
                % (EC2_XMLNS, uuid.uuid4(), result)), "text/xml"

    def _pricing(self, body, call):
        sim = self.server.sim
        call["action"] = "GetProducts"
        try:
            req = json.loads(body.decode("utf-8") or "null")
        except (UnicodeDecodeError, ValueError):
            req = None
        call["params"] = req
        self._sign(call, body, "pricing", sim.pricing_region)
        if self.headers.get("X-Amz-Target") != TARGET:
            raise asg.ApiError(400, "UnknownOperationException",
                               "unknown target %s" % self.headers.get("X-Amz-Target"))
        if self.headers.get("Content-Type", "") != "application/x-amz-json-1.1":
            raise asg.ApiError(400, "SerializationException",
                               "Content-Type must be application/x-amz-json-1.1")
        with sim.lock:
            result = sim.get_products(req)
            sim.take_fault(call["action"])
        return json.dumps(result), "application/x-amz-json-1.1"

    def _sign(self, call, body, service, region):
        call["service"] = service
        ak, got_region, _, _ = self.server.sim.check_signature(
            "POST", "/", "", self.headers, body, service=service, region=region)
        call.update(access_key=ak, region=got_region)

    def _api(self, method, path, query, body):
        sim = self.server.sim
        pricing = self.headers.get("X-Amz-Target") is not None
        call = {"service": "pricing" if pricing else "ec2", "action": None, "params": {},
                "status": 200, "code": None, "access_key": None, "region": None}
        try:
            if method != "POST" or path != "/" or query:
                raise asg.ApiError(400, "InvalidAction", "only POST / is served")
            answer, ctype = (self._pricing if pricing else self._ec2)(body, call)
            status = 200
        except asg.ApiError as e:
            code = JSON_CODES.get(e.code, e.code) if pricing else e.code
            call["status"], call["code"], status = e.status, code, e.status
            if pricing:
                answer, ctype = json.dumps({"__type": code, "message": e.message}), \
                    "application/x-amz-json-1.1"
            else:
                answer, ctype = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors>'
                                 "<Error><Code>%s</Code><Message>%s</Message></Error></Errors>"
                                 "<RequestID>%s</RequestID></Response>\n"
                                 % (asg.xml_escape(code), asg.xml_escape(e.message),
                                    uuid.uuid4())), "text/xml"
        with sim.lock:
            sim.calls.append(call)
        self._reply_typed(status, answer, ctype, call["code"] if pricing else None)

    def _reply_typed(self, status, body, content_type, error_type):
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        if error_type:
            self.send_header("x-amzn-ErrorType", error_type)
        self.end_headers()
        self.wfile.write(data)


def main(argv=None):
    ap = argparse.ArgumentParser(description="EC2 spot price and Price List simulator for tests")
    ap.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    ap.add_argument("--port", type=int, default=0, help="0 = ephemeral port")
    ap.add_argument("--port-file", help="write the bound port here (atomically)")
    ap.add_argument("--region", default="us-east-1", help="the region EC2 calls are signed for")
    ap.add_argument("--pricing-region", default="us-east-1",
                    help="the region Price List calls are signed for")
    ap.add_argument("--access-key", default="AKIDPRICESSIM", help="the accepted access key")
    ap.add_argument("--secret-key", default="prices-sim-secret", help="its secret")
    ap.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    args = ap.parse_args(argv)
    if args.host not in ("127.0.0.1", "::1", "localhost"):
        ap.error("refusing to bind non-loopback address %r" % args.host)
    host = "127.0.0.1" if args.host == "localhost" else args.host
    asg.Server.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        srv = asg.Server((host, args.port), Handler)
    except OSError as e:
        print("prices_sim: cannot bind %s:%d: %s" % (host, args.port, e), file=sys.stderr)
        return 1
    srv.sim = PriceSim(args.region, args.pricing_region, args.access_key, args.secret_key)
    srv.verbose = args.verbose
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    t.start()
    if args.port_file:
        asg.write_port_file(args.port_file, srv.server_address[1])
    else:
        print(srv.server_address[1], flush=True)
    stop.wait()
    srv.shutdown()
    srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

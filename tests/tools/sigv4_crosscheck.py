#!/usr/bin/env python3
"""Cross-checks common/sigv4 against botocore's S3 signer.

    /usr/bin/python3 tests/tools/sigv4_crosscheck.py path/to/sigv4_tool [-n N] [-v]

Generates N (default 1500) deterministic pseudo-random S3 requests: keys with
spaces, reserved characters, '%', unicode, deep paths, '//' and './'
segments; S3 queries (uploads=, partNumber/uploadId, list-type=2 with odd
prefixes and continuation tokens); optional session tokens; GET, PUT, HEAD,
DELETE and POST. Each is signed by botocore.auth.S3SigV4Auth (with the clock
pinned) and by sigv4_tool (SignRequest), and the Authorization headers must
be identical. Exits 0 and prints "sigv4 cross-check: N cases agree", or
prints the first differing cases with both canonical requests and exits 1.

Needs Debian's python3-botocore (tested with 1.29); stdlib otherwise.

How botocore is driven, and why:
  * The clock: SigV4Auth.add_auth() takes `datetime.datetime.utcnow()` from
    the `datetime` module it imported and overwrites
    request.context['timestamp'] on every call, so setting the context is not
    enough; the script swaps botocore.auth.datetime for a shim whose
    datetime.utcnow() returns the pinned time, and checks the X-Amz-Date that
    comes out.
  * The path: S3SigV4Auth._normalize_url_path() returns the URL's path
    untouched (no normalisation, no quoting), so the canonical URI is
    whatever the URL holds. The URL is built the way botocore's own REST
    serializer builds S3 object URLs, percent_encode(key, safe='/~'), so the
    canonical URI is the key encoded once.
  * The query: half the cases pass raw pairs as request.params (botocore
    encodes them itself), half put an already-encoded query in the URL, as
    botocore's S3 client does (including a bare "?uploads" with no '=').
  * The payload hash: S3SigV4Auth recomputes X-Amz-Content-SHA256 from the
    body; over http:// it always signs the body unless the client config says
    s3={'payload_signing_enabled': False}, which gives UNSIGNED-PAYLOAD.
  * Headers botocore will not sign (User-Agent, Expect, X-Amzn-Trace-Id) and
    Date (botocore rewrites Date and then drops X-Amz-Date) are not generated:
    which headers a caller signs is the caller's choice, not the signer's.
"""

import datetime
import hashlib
import json
import random
import subprocess
import sys
import time
import types

try:
    import botocore
    import botocore.auth
    import botocore.awsrequest
    import botocore.config
    import botocore.credentials
    import botocore.utils
except ImportError as e:  # pragma: no cover
    print("sigv4 cross-check: botocore is not importable by %s: %s" % (sys.executable, e))
    sys.exit(1)

SEED = 20261122
HOST = "127.0.0.1:9000"
ENDPOINT = "http://" + HOST
VERBOSE = "-v" in sys.argv[1:]


class _PinnedDateTime(datetime.datetime):
    pinned = None

    @classmethod
    def utcnow(cls):
        return cls.pinned


_DATETIME_SHIM = types.SimpleNamespace(datetime=_PinnedDateTime)


class _CapturingS3SigV4Auth(botocore.auth.S3SigV4Auth):
    """botocore's S3 signer, remembering the canonical request it signed."""

    last_canonical_request = None

    def canonical_request(self, request):
        cr = super().canonical_request(request)
        self.last_canonical_request = cr
        return cr


def botocore_sign(case):
    """Signs `case` with botocore; returns (authorization, canonical_request)."""
    when = datetime.datetime.strptime(case["amz_date"], "%Y%m%dT%H%M%SZ")
    url = ENDPOINT + botocore.utils.percent_encode(case["path"], safe="/~")
    params = None
    if case["_query_in_url"] and case["query"]:
        parts = []
        for name, value in case["query"]:
            if value == "" and case["_bare_subresource"]:
                parts.append(botocore.utils.percent_encode(name))
            else:
                parts.append(botocore.utils.percent_encode_sequence([(name, value)]))
        url += "?" + "&".join(parts)
    elif case["query"]:
        params = [tuple(p) for p in case["query"]]
    request = botocore.awsrequest.AWSRequest(
        method=case["method"], url=url, data=case["_body"], params=params
    )
    for name, value in case["headers"]:
        if name.lower() == "host" and not case["_send_host"]:
            continue  # botocore derives it from the URL
        request.headers[name] = value  # HTTPMessage: appends, keeps repeats
    if case["payload_sha256"] == "UNSIGNED-PAYLOAD":
        request.context["client_config"] = botocore.config.Config(
            s3={"payload_signing_enabled": False}
        )
    credentials = botocore.credentials.Credentials(
        case["access_key"], case["secret_key"], case["session_token"] or None
    )
    signer = _CapturingS3SigV4Auth(credentials, case["service"], case["region"])
    saved = botocore.auth.datetime
    _PinnedDateTime.pinned = when
    botocore.auth.datetime = _DATETIME_SHIM
    try:
        signer.add_auth(request)
    finally:
        botocore.auth.datetime = saved
    if request.headers.get("X-Amz-Date") != case["amz_date"]:
        raise RuntimeError(
            "could not pin botocore's clock: X-Amz-Date %r, wanted %r"
            % (request.headers.get("X-Amz-Date"), case["amz_date"])
        )
    if request.headers.get("X-Amz-Content-SHA256") != case["payload_sha256"]:
        raise RuntimeError(
            "botocore hashed the payload as %r, wanted %r"
            % (request.headers.get("X-Amz-Content-SHA256"), case["payload_sha256"])
        )
    return request.headers["Authorization"], signer.last_canonical_request


# --- case generation ---------------------------------------------------------

SPECIALS = [" ", "  ", "+", "=", "%", "%20", "%2F", "~", "$", "&", "?", "#", ":", "@",
            "!", "*", "'", "(", ")", ",", ";", "[", "]", "{", "}", "^", "`", "|", "\\",
            "\"", "<", ">", "-", "_", ".", "\u00e9", "\u65e5\u672c", "\U0001F600",
            "\u00fc\u00df", "\u0410\u0411", "\u1234"]
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
B64 = ALNUM + "+/"
BUCKETS = ["bucket", "my-bucket.v2", "spotguard-test-123"]
REGIONS = ["us-east-1", "eu-west-1", "ap-northeast-1", "us-gov-west-1", "cn-north-1"]
METHODS = ["GET", "PUT", "HEAD", "DELETE", "POST"]


def word(rng, n_min=1, n_max=8):
    out = []
    for _ in range(rng.randint(n_min, n_max)):
        if rng.random() < 0.35:
            out.append(rng.choice(SPECIALS))
        else:
            out.append(rng.choice(ALNUM))
    return "".join(out)


def key(rng):
    segments = []
    for _ in range(rng.choice([1, 1, 2, 3, 5, 9])):
        r = rng.random()
        if r < 0.06:
            segments.append(".")  # "./" must stay
        elif r < 0.09:
            segments.append("..")
        elif r < 0.15:
            segments.append("")  # "//" must stay
        else:
            segments.append(word(rng))
    k = "/".join(segments)
    if rng.random() < 0.08:
        k += "/"
    if rng.random() < 0.05:
        k = "/" + k
    return k or "x"


def token(rng, n):
    return "".join(rng.choice(B64) for _ in range(n))


def query(rng, method):
    r = rng.random()
    if r < 0.25:
        q = []
    elif r < 0.35:
        q = [("uploads", "")]
    elif r < 0.5:
        q = [("partNumber", str(rng.randint(1, 10000))), ("uploadId", word(rng, 10, 30))]
    elif r < 0.55:
        q = [("uploadId", token(rng, 40) + "==")]
    elif r < 0.75:
        q = [("list-type", "2"), ("prefix", key(rng))]
        if rng.random() < 0.6:
            q.append(("continuation-token", token(rng, 20) + rng.choice(["", "=", "=="])))
        if rng.random() < 0.5:
            q.append(("delimiter", rng.choice(["/", "|", " ", "%"])))
        if rng.random() < 0.4:
            q.append(("max-keys", str(rng.randint(0, 1000))))
        if rng.random() < 0.3:
            q.append(("start-after", key(rng)))
        if rng.random() < 0.3:
            q.append(("encoding-type", "url"))
    elif r < 0.82:
        q = [(rng.choice(["tagging", "acl", "versioning", "lifecycle", "delete", "uploads"]), "")]
        if rng.random() < 0.5:
            q.append(("versionId", word(rng, 5, 20)))
    elif r < 0.9:
        name = word(rng, 1, 6)
        q = [(name, word(rng, 0, 6)), (name, word(rng, 0, 6))]  # a repeated name
    else:
        q = [(word(rng, 1, 6), word(rng, 0, 10)) for _ in range(rng.randint(1, 4))]
    rng.shuffle(q)
    return q


def header_value(rng):
    chars = ALNUM + " !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    v = "".join(rng.choice(chars) for _ in range(rng.randint(0, 20)))
    if rng.random() < 0.3:
        v = rng.choice(["", " ", "  ", "\t"]) + v + rng.choice(["", " ", "   ", "\t"])
    if rng.random() < 0.3:
        v = v.replace(" ", rng.choice(["   ", " \t "]))
    return v


def random_case(rng, i):
    method = rng.choice(METHODS)
    path = "/" + rng.choice(BUCKETS) + "/" + key(rng)
    q = query(rng, method)
    headers = [(rng.choice(["Host", "host", "HOST"]), HOST)]
    extra = []
    if rng.random() < 0.4:
        extra.append(("Content-Type", rng.choice(["application/octet-stream", "text/plain; charset=utf-8"])))
    if rng.random() < 0.3:
        extra.append(("x-amz-meta-" + rng.choice(["note", "Owner", "a-b"]), header_value(rng)))
    if rng.random() < 0.15:
        extra.append(("X-Amz-Meta-Dup", header_value(rng)))
        extra.append(("x-amz-meta-dup", header_value(rng)))
    if method == "GET" and rng.random() < 0.3:
        extra.append(("Range", "bytes=%d-%d" % (rng.randint(0, 99), rng.randint(100, 999))))
    if method == "PUT" and rng.random() < 0.3:
        extra.append(("x-amz-storage-class", rng.choice(["STANDARD", "REDUCED_REDUNDANCY"])))
    if method == "PUT" and rng.random() < 0.2:
        extra.append(("If-None-Match", "*"))
    if method == "PUT" and rng.random() < 0.2:
        extra.append(("x-amz-copy-source",
                      botocore.utils.percent_encode("/" + rng.choice(BUCKETS) + "/" + key(rng), safe="/~")))
    if rng.random() < 0.2:
        extra.append(("Content-MD5", token(rng, 22) + "=="))
    headers += extra
    rng.shuffle(headers)

    body = b""
    if method in ("PUT", "POST"):
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
    unsigned = rng.random() < 0.15
    payload = "UNSIGNED-PAYLOAD" if unsigned else hashlib.sha256(body).hexdigest()

    # 2000-01-01 .. 2037-12-31, plus a few calendar edges.
    if i % 50 == 0:
        when = rng.choice([datetime.datetime(2024, 2, 29, 23, 59, 59),
                           datetime.datetime(2026, 12, 31, 23, 59, 59),
                           datetime.datetime(2027, 1, 1, 0, 0, 0),
                           datetime.datetime(2000, 3, 1, 0, 0, 0)])
    else:
        when = datetime.datetime(2000, 1, 1) + datetime.timedelta(
            seconds=rng.randrange(38 * 365 * 86400))
    session = ""
    if rng.random() < 0.4:
        session = token(rng, rng.randint(16, 400)) + rng.choice(["", "=", "=="])
    return {
        "method": method,
        "path": path,
        "query": [list(p) for p in q],
        "headers": [list(h) for h in headers],
        "payload_sha256": payload,
        "access_key": rng.choice(["AKIA", "ASIA"]) + "".join(
            rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16)),
        "secret_key": token(rng, 40),
        "session_token": session,
        "region": rng.choice(REGIONS),
        "service": "s3",
        "amz_date": when.strftime("%Y%m%dT%H%M%SZ"),
        "_body": body,
        "_query_in_url": rng.random() < 0.5,
        "_bare_subresource": rng.random() < 0.5,
        "_send_host": rng.random() < 0.5,
    }


def fixed_cases():
    """Hand-written cases for the rules that matter most, before the random ones."""
    base = {
        "query": [], "headers": [["Host", HOST]],
        "payload_sha256": hashlib.sha256(b"").hexdigest(),
        "access_key": "AKIAIOSFODNN7EXAMPLE",
        "secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "session_token": "", "region": "us-east-1", "service": "s3",
        "amz_date": "20261122T083000Z", "_body": b"", "_query_in_url": False,
        "_bare_subresource": False, "_send_host": True,
    }
    out = []
    for method, path, q in [
        ("GET", "/bucket/a b+c=d%e~f$g&h?i#j:k@l", []),
        ("PUT", "/bucket/caf\u00e9/\u65e5\u672c/\U0001F600.txt", []),
        ("GET", "/bucket/a//b/./c/../d", []),
        ("GET", "/bucket/%2F already%20encoded", []),
        ("POST", "/bucket/big.bin", [["uploads", ""]]),
        ("PUT", "/bucket/big.bin", [["partNumber", "7"], ["uploadId", "a+b/c=="]]),
        ("GET", "/bucket", [["list-type", "2"], ["prefix", "runs/2026 11/\u00e9+"],
                            ["continuation-token", "1/x+y=="], ["delimiter", "/"]]),
    ]:
        c = dict(base, method=method, path=path, query=q)
        out.append(c)
        out.append(dict(c, session_token="FQoGZXIvYXdzE//+token==", _query_in_url=True))
    return out


def self_test_against_published_examples():
    """botocore, driven as below, must reproduce the S3 documentation's examples
    (docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html);
    otherwise a disagreement would say nothing about common/sigv4."""
    global ENDPOINT
    saved = ENDPOINT
    ENDPOINT = "http://examplebucket.s3.amazonaws.com"
    try:
        empty = hashlib.sha256(b"").hexdigest()
        common = {"headers": [["Host", "examplebucket.s3.amazonaws.com"]],
                  "payload_sha256": empty, "access_key": "AKIAIOSFODNN7EXAMPLE",
                  "secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                  "session_token": "", "region": "us-east-1", "service": "s3",
                  "amz_date": "20130524T000000Z", "_body": b"", "_bare_subresource": False,
                  "_send_host": True}
        get_object = dict(common, method="GET", path="/test.txt", query=[], _query_in_url=False,
                          headers=common["headers"] + [["Range", "bytes=0-9"]])
        list_objects = dict(common, method="GET", path="/", query=[["max-keys", "2"], ["prefix", "J"]],
                            _query_in_url=True)
        for case, signature in [
            (get_object, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"),
            (list_objects, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
        ]:
            authorization, _ = botocore_sign(case)
            if not authorization.endswith("Signature=" + signature):
                print("sigv4 cross-check: botocore harness does not reproduce the published "
                      "example (%s %s): %s" % (case["method"], case["path"], authorization))
                sys.exit(1)
    finally:
        ENDPOINT = saved


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    n = 1500
    if "-n" in args:
        i = args.index("-n")
        n = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__)
        return 2
    tool = args[0]
    started = time.monotonic()

    self_test_against_published_examples()

    rng = random.Random(SEED)
    cases = fixed_cases()
    while len(cases) < n:
        cases.append(random_case(rng, len(cases)))

    expected = [botocore_sign(c) for c in cases]

    public = [{k: v for k, v in c.items() if not k.startswith("_")} for c in cases]
    stdin = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in public)
    proc = subprocess.run([tool], input=stdin.encode("utf-8"), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=120)
    if proc.returncode != 0:
        print("sigv4 cross-check: %s exited %d: %s" % (tool, proc.returncode,
                                                       proc.stderr.decode(errors="replace")))
        return 1
    lines = proc.stdout.decode("utf-8").splitlines()
    if len(lines) != len(cases):
        print("sigv4 cross-check: %d cases sent, %d answers" % (len(cases), len(lines)))
        return 1

    bad = []
    for case, (b_auth, b_creq), line in zip(public, expected, lines):
        got = json.loads(line)
        if "error" in got or got.get("authorization") != b_auth:
            bad.append((case, b_auth, b_creq, got))
    elapsed = time.monotonic() - started
    if bad:
        print("sigv4 cross-check: %d of %d cases differ from botocore; the first %d:"
              % (len(bad), len(cases), min(5, len(bad))))
        for case, b_auth, b_creq, got in bad[:5]:
            print("=" * 78)
            print("case: " + json.dumps(case, ensure_ascii=False))
            print("--- botocore authorization:\n" + b_auth)
            print("--- sigv4_tool authorization:\n" + str(got.get("authorization", got.get("error"))))
            print("--- botocore canonical request:\n" + b_creq)
            print("--- sigv4_tool canonical request:\n" + str(got.get("canonical_request")))
        return 1
    if VERBOSE:
        print("(%.1f s)" % elapsed)
    print("sigv4 cross-check: %d cases agree" % len(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A container credentials endpoint for spotguard's credential-expiry tests.

Stdlib only.  Serves what ECS/EKS hand to AWS_CONTAINER_CREDENTIALS_FULL_URI
on a loopback port:

    credentials_server.py [--port 0] [--port-file FILE] [--token TOKEN]

* GET /creds  -> 200 {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}
  with the credentials set last; 503 before any are set; 401 when --token is
  given and the Authorization header differs.
* POST /_creds/set  {"AccessKeyId", "SecretAccessKey", "Expiration"} replaces
  the credentials handed out from now on.
* GET /_creds/log   [{"time": unix seconds, "key": AccessKeyId}] per /creds
  answer, oldest first.

Secrets are never logged or printed; /_creds/log holds key ids only.
"""

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"creds": None, "log": []}
TOKEN = None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/creds":
            if TOKEN is not None and self.headers.get("Authorization") != TOKEN:
                return self.reply(401, {"Code": "Unauthorized"})
            with LOCK:
                creds = STATE["creds"]
                if creds is None:
                    return self.reply(503, {"Code": "NotReady"})
                STATE["log"].append({"time": time.time(), "key": creds["AccessKeyId"]})
                body = dict(creds)
            body.setdefault("Token", "")
            body["Code"] = "Success"
            return self.reply(200, body)
        if self.path == "/_creds/log":
            with LOCK:
                return self.reply(200, list(STATE["log"]))
        return self.reply(404, {"Code": "NotFound"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0") or 0)
        body = self.rfile.read(n)
        if self.path == "/_creds/set":
            try:
                creds = json.loads(body)
                for k in ("AccessKeyId", "SecretAccessKey", "Expiration"):
                    if not isinstance(creds.get(k), str):
                        raise ValueError("missing " + k)
            except ValueError as e:
                return self.reply(400, {"error": str(e)})
            with LOCK:
                STATE["creds"] = creds
            return self.reply(200, {"ok": True})
        return self.reply(404, {"Code": "NotFound"})


def main():
    global TOKEN
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--token")
    args = ap.parse_args()
    TOKEN = args.token
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(server.server_address[1]))
        os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()

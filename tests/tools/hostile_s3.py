#!/usr/bin/env python3
"""A hostile S3 server for spotguard's hostile-input tests.

Stdlib only. It does not check signatures and keeps objects in memory, just
enough for `spotguard ls`, `snapshot` and `gc` to get to the answer under
test, and then answers one operation with whatever body it was told to:

    hostile_s3.py [--port 0] [--port-file FILE]

Control API (JSON):
    POST /_sim/answer  {"op": OP, "body": "...", "status": 200, "repeat_body_mb": 0}
        OP is list (ListObjectsV2), initiate (CreateMultipartUpload),
        complete (CompleteMultipartUpload), uploads (ListMultipartUploads) or
        get (GetObject). "body" is sent as it is (UTF-8; "\\u00ff"-style
        escapes give raw bytes 0..255 via latin-1 when "latin1": true);
        "repeat_body_mb" > 0 sends the body repeated to about that many MiB
        (huge answers), between optional "prefix" and "suffix" strings. The placeholder {token} is replaced by the request's
        continuation-token / key-marker, so a server can send the same token back.
    DELETE /_sim/answer  back to normal answers
    GET /_sim/requests   ["GET /bucket?list-type=2...", ...]

Without an override: PUT stores the object (If-None-Match: * honoured),
GET/HEAD serve it, DELETE removes it, ListObjectsV2 lists stored keys,
multipart uploads work, ListMultipartUploads lists none.
"""
import argparse
import json
import os
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.objects = {}
        self.uploads = {}
        self.answers = {}
        self.requests = []
        self.next_upload = 1


def xml(body):
    return ('<?xml version="1.0" encoding="UTF-8"?>' + body).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _send(self, code, body=b"", headers=None, head=False):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _override(self, op, query):
        st = self.server.state
        with st.lock:
            a = st.answers.get(op)
        if a is None:
            return False
        token = (query.get("continuation-token") or query.get("key-marker") or [""])[0]
        text = a.get("body", "").replace("{token}", token)
        body = text.encode("latin-1" if a.get("latin1") else "utf-8", "surrogatepass")
        mb = a.get("repeat_body_mb", 0)
        if mb and body:
            body = body * max(1, (mb << 20) // len(body))
        body = a.get("prefix", "").encode() + body + a.get("suffix", "").encode()
        self._send(a.get("status", 200), body, {"Content-Type": "application/xml"})
        return True

    def _route(self, method):
        st = self.server.state
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        data = self._body() if method in ("PUT", "POST") else b""
        if url.path.startswith("/_sim/"):
            return self._control(method, url.path, data)
        with st.lock:
            st.requests.append(method + " " + self.path)
        parts = url.path.lstrip("/").split("/", 1)
        bucket = parts[0]
        key = urllib.parse.unquote(parts[1]) if len(parts) > 1 else ""

        if method == "GET" and not key and "list-type" in query:
            if self._override("list", query):
                return
            prefix = query.get("prefix", [""])[0]
            with st.lock:
                keys = sorted(k for k in st.objects if k.startswith(prefix))
            items = "".join(
                "<Contents><Key>%s</Key><Size>%d</Size><ETag>\"e\"</ETag>"
                "<LastModified>2026-11-22T08:00:00.000Z</LastModified></Contents>"
                % (k.replace("&", "&amp;").replace("<", "&lt;"), len(st.objects[k])) for k in keys)
            return self._send(200, xml("<ListBucketResult><Name>%s</Name><IsTruncated>false"
                                       "</IsTruncated>%s</ListBucketResult>" % (bucket, items)))
        if method == "GET" and not key and "uploads" in query:
            if self._override("uploads", query):
                return
            return self._send(200, xml("<ListMultipartUploadsResult><IsTruncated>false"
                                       "</IsTruncated></ListMultipartUploadsResult>"))
        if method == "POST" and "uploads" in query:
            if self._override("initiate", query):
                return
            with st.lock:
                uid = "u%d" % st.next_upload
                st.next_upload += 1
                st.uploads[uid] = {}
            return self._send(200, xml("<InitiateMultipartUploadResult><Key>%s</Key><UploadId>%s"
                                       "</UploadId></InitiateMultipartUploadResult>" % (key, uid)))
        if method == "PUT" and "uploadId" in query:
            uid = query["uploadId"][0]
            with st.lock:
                st.uploads.setdefault(uid, {})[int(query["partNumber"][0])] = data
            return self._send(200, b"", {"ETag": '"p%s"' % query["partNumber"][0]})
        if method == "POST" and "uploadId" in query:
            if self._override("complete", query):
                return
            with st.lock:
                parts = st.uploads.pop(query["uploadId"][0], {})
                st.objects[key] = b"".join(parts[n] for n in sorted(parts))
            return self._send(200, xml("<CompleteMultipartUploadResult><Key>%s</Key><ETag>\"c\""
                                       "</ETag></CompleteMultipartUploadResult>" % key))
        if method == "DELETE" and "uploadId" in query:
            with st.lock:
                st.uploads.pop(query["uploadId"][0], None)
            return self._send(204)
        if method == "PUT":
            with st.lock:
                if self.headers.get("If-None-Match") == "*" and key in st.objects:
                    return self._send(412, xml("<Error><Code>PreconditionFailed</Code></Error>"))
                st.objects[key] = data
            return self._send(200, b"", {"ETag": '"e"'})
        if method in ("GET", "HEAD"):
            if method == "GET" and self._override("get", query):
                return
            with st.lock:
                obj = st.objects.get(key)
            if obj is None:
                return self._send(404, xml("<Error><Code>NoSuchKey</Code></Error>"),
                                  head=(method == "HEAD"))
            return self._send(200, obj, {"ETag": '"e"'}, head=(method == "HEAD"))
        if method == "DELETE":
            with st.lock:
                st.objects.pop(key, None)
            return self._send(204)
        if method == "POST" and "delete" in query:
            return self._send(200, xml("<DeleteResult></DeleteResult>"))
        return self._send(400, xml("<Error><Code>NotImplemented</Code></Error>"))

    def _control(self, method, path, data):
        st = self.server.state
        if path == "/_sim/answer" and method == "POST":
            a = json.loads(data or b"{}")
            with st.lock:
                st.answers[a["op"]] = a
            return self._send(200, b"{}")
        if path == "/_sim/answer" and method == "DELETE":
            with st.lock:
                st.answers = {}
            return self._send(200, b"{}")
        if path == "/_sim/requests" and method == "GET":
            with st.lock:
                return self._send(200, json.dumps(st.requests).encode())
        return self._send(404, b"{}")

    def do_GET(self):
        self._route("GET")

    def do_HEAD(self):
        self._route("HEAD")

    def do_PUT(self):
        self._route("PUT")

    def do_POST(self):
        self._route("POST")

    def do_DELETE(self):
        self._route("DELETE")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    args = ap.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.state = State()
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(server.server_address[1]))
        os.replace(tmp, args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

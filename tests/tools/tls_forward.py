#!/usr/bin/env python3
"""A TLS front for a plain-HTTP server: accepts TLS on an ephemeral loopback
port with the given certificate and copies bytes both ways to UPSTREAM
(host:port). Tests use it to put the Ceph gateway behind https.

  tls_forward.py CERT KEY PORT_FILE UPSTREAM_HOST:PORT
"""
import os
import socket
import ssl
import sys
import threading


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(conn, context, upstream):
    try:
        tls = context.wrap_socket(conn, server_side=True)
    except (ssl.SSLError, OSError):
        conn.close()  # the client refused our certificate: nothing to forward
        return
    try:
        up = socket.create_connection(upstream)
    except OSError:
        tls.close()
        return
    t = threading.Thread(target=pump, args=(up, tls), daemon=True)
    t.start()
    pump(tls, up)
    t.join()
    tls.close()
    up.close()


def main():
    cert, key, port_file, upstream = sys.argv[1:5]
    host, port = upstream.rsplit(":", 1)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    with open(port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, context, (host, int(port))), daemon=True).start()


if __name__ == "__main__":
    main()

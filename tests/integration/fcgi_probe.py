#!/usr/bin/env python3
"""fcgi_probe.py SOCKET -- a few FastCGI requests straight to an API host's
unix socket (./dev's valgrind check runs it against the host under valgrind,
so the FastCGI server's read, parse and write paths run there too).

On one kept-alive connection: /healthz 200, a missing route 404, a body that
is not JSON (no token: 401, the body drained), /metrics 200; then /healthz without FCGI_KEEP_CONN, after
which the host must close the connection.  Exit 0 when every answer is as
expected, else 1 with what came instead."""
import socket
import struct
import sys


def rec(rtype, rid, body=b""):
    return struct.pack(">BBHHBB", 1, rtype, rid, len(body), 0, 0) + body


def nv(k, v):
    def ln(n):
        return bytes([n]) if n < 128 else struct.pack(">I", n | 0x80000000)
    return ln(len(k)) + ln(len(v)) + k + v


def request(s, rid, keep, method, uri, body=b""):
    p = nv(b"REQUEST_METHOD", method) + nv(b"REQUEST_URI", uri) + \
        nv(b"DOCUMENT_URI", uri.split(b"?")[0]) + nv(b"SERVER_PROTOCOL", b"HTTP/1.1")
    if body:
        p += nv(b"CONTENT_TYPE", b"application/json") + \
            nv(b"CONTENT_LENGTH", str(len(body)).encode())
    out = rec(1, rid, struct.pack(">HB5x", 1, 1 if keep else 0)) + rec(4, rid, p) + rec(4, rid)
    if body:
        out += rec(5, rid, body)
    s.sendall(out + rec(5, rid))
    data, buf = b"", b""
    while True:
        while len(buf) < 8 or len(buf) < 8 + struct.unpack(">H", buf[4:6])[0] + buf[6]:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("connection closed before END_REQUEST")
            buf += chunk
        _, rtype, _, clen, plen, _ = struct.unpack(">BBHHBB", buf[:8])
        content, buf = buf[8:8 + clen], buf[8 + clen + plen:]
        if rtype == 6:
            data += content
        elif rtype == 3:
            return int(data.split(b" ", 2)[1]) if data.startswith(b"Status: ") else 0


def main():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(sys.argv[1])
    want = [(b"GET", b"/healthz", b"", 200), (b"GET", b"/api/v1/no/such/route", b"", 404),
            (b"POST", b"/api/public/calendar/appointments", b"{not json", 401),
            (b"GET", b"/metrics", b"", 200)]
    for i, (m, u, b, st) in enumerate(want, 1):
        got = request(s, i, True, m, u, b)
        if got != st:
            print(f"fcgi_probe: {m.decode()} {u.decode()}: {got}, want {st}")
            return 1
    s.close()
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(sys.argv[1])
    if request(s, 1, False, b"GET", b"/healthz") != 200 or s.recv(1) != b"":
        print("fcgi_probe: no close after a request without FCGI_KEEP_CONN")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

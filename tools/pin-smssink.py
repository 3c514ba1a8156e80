#!/usr/bin/python3
"""pin-smssink -- the dev stack's SMS provider.

Listens on 127.0.0.1:PORT and records every POST as one JSON line in LOG:
  {"ts": ..., "path": "/sms", "authorization": "Bearer ...", "body": {...}}
and answers 200 {"id": "sink-<n>", "status": "accepted"} -- the shape notify.so
expects of a provider (doc/operating.md, "E-mail and SMS delivery").

Tests steer it with the file LOG.status: when it holds a number (400, 503 ...),
requests are answered with that status (and still recorded), e.g.
  echo 503 > "$PIN_SMS_LOG.status"; ...; rm "$PIN_SMS_LOG.status"
and LOG.delay (seconds): the answer is held back that long after the request
was recorded (a slow provider; the crash test kills a host meanwhile),
and LOG.status_to: a JSON object {"<to>": status, ...} answering the
requests to those numbers with their own status (one batch, mixed
outcomes).  Each record names the client's port ("peer"): the connections
a sender used.

usage: pin-smssink.py PORT LOG
"""
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])
LOG = sys.argv[2]
lock = threading.Lock()
seq = [0]


class Handler(BaseHTTPRequestHandler):
    # keep-alive, as a provider's API: notify.so reuses its connection
    protocol_version = "HTTP/1.1"
    # headers and body are two writes: without TCP_NODELAY the body waits
    # for the client's delayed ACK (40 ms) on a kept-alive connection
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):  # quiet
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw.decode("utf-8"))
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        status = 200
        try:
            with open(LOG + ".status") as f:
                status = int(f.read().strip() or 200)
        except (OSError, ValueError):
            pass
        try:
            with open(LOG + ".status_to") as f:
                status = int(json.load(f).get(body.get("to"), status))
        except (OSError, ValueError, AttributeError, TypeError):
            pass
        with lock:
            seq[0] += 1
            sid = "sink-%d" % seq[0]
            rec = {"ts": time.time(), "path": self.path,
                   "peer": self.client_address[1],
                   "authorization": self.headers.get("Authorization"),
                   "status": status, "id": sid, "body": body}
            with open(LOG, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        try:
            with open(LOG + ".delay") as f:
                time.sleep(float(f.read().strip() or 0))
        except (OSError, ValueError):
            pass
        out = json.dumps({"id": sid, "status": "accepted"} if status < 300 else
                         {"error": "sink answers %d" % status}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


if __name__ == "__main__":
    open(LOG, "a").close()
    srv = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    srv.daemon_threads = True
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass

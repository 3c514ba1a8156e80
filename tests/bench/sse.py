#!/usr/bin/env python3
"""sse.py BASE_URL TOKENS OUT READY SECONDS -- in-app subscribers of `./dev bench burst`.

For each line "userId token" of TOKENS, the client path of doc/api.md
"Real-time notification stream": POST /api/v1/me/notifications/stream-ticket
with the JWT, then GET the answer's streamUrl (Accept: text/event-stream)
through nginx and nchan, one thread and one connection per subscriber.  Each
event's `data:` line is written to OUT as "receive_epoch userId id" (flushed
at once); READY gets "connected K of N" when every stream answered its headers
(or failed).  Ends after SECONDS or on SIGTERM.  Python's standard library
only (Debian's python3)."""
import http.client
import json
import signal
import sys
import threading
import time
import urllib.parse

base, tokens, out_path, ready_path, secs = sys.argv[1:6]
u = urllib.parse.urlsplit(base)
lines = [l.split() for l in open(tokens) if l.strip()]
out = open(out_path, "a", buffering=1)
lock = threading.Lock()
connected = [0, 0]            # ok, failed
done = threading.Event()


def sub(user, tok):
    ok = False
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        c.request("POST", "/api/v1/me/notifications/stream-ticket", body=b"",
                  headers={"Authorization": "Bearer " + tok})
        r = c.getresponse()
        url = json.loads(r.read())["streamUrl"]
        c.close()
        s = http.client.HTTPConnection(u.hostname, u.port, timeout=None)
        s.request("GET", url, headers={"Accept": "text/event-stream"})
        r = s.getresponse()
        ok = r.status == 200
    except (OSError, ValueError, KeyError, http.client.HTTPException):
        pass
    with lock:
        connected[0 if ok else 1] += 1
    if not ok:
        return
    try:
        while not done.is_set():
            line = r.readline()
            if not line:
                break
            if line.startswith(b"data:"):
                t = time.time()
                try:
                    nid = json.loads(line[5:]).get("id", "-")
                except ValueError:
                    nid = "-"
                with lock:
                    out.write("%.6f %s %s\n" % (t, user, nid))
    except (OSError, http.client.HTTPException):
        pass


signal.signal(signal.SIGTERM, lambda *a: done.set())
for user, tok in lines:
    threading.Thread(target=sub, args=(user, tok), daemon=True).start()
t0 = time.time()
while sum(connected) < len(lines) and time.time() - t0 < 60:
    time.sleep(0.05)
with open(ready_path, "w") as f:
    f.write("connected %d of %d\n" % (connected[0], len(lines)))
done.wait(float(secs))

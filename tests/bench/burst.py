#!/usr/bin/env python3
"""burst.py -- the arrival times of `./dev bench burst` (tests/bench/burst.sh).

  burst.py count MAILDIR SINCE DOMAIN
      files in MAILDIR/new written at or after SINCE (epoch s): a cheap count
      (no file is read), the poll of the wait
  burst.py email MAILDIR SINCE DOMAIN DUE [--delete]
      the bench's e-mails: files of MAILDIR/new written at or after SINCE
      whose X-RcptTo (the header the dev SMTP server, aiosmtpd's Mailbox
      handler, adds) ends in @DOMAIN; arrival = the file's mtime (the server
      writes the file before it answers 250, and sets no time header);
      --delete removes them afterwards
  burst.py wait MAILDIR SINCE DOMAIN E LOG OFFSET PREFIXES S SSEFILE I DUE UNTIL
      polls (0.5 s) until E bench e-mails, S bench SMS and I in-app lines
      (at or after DUE) have arrived or the clock passes UNTIL (epoch s); each file and line is
      read once; prints "e s i"
  burst.py sms LOG OFFSET PREFIXES DUE
      the bench's SMS: the sink's JSON lines after byte OFFSET whose body.to
      starts with one of PREFIXES (comma-separated); arrival = the line's "ts" (the sink's clock when it
      recorded the request, before it answers)
  burst.py inapp FILE DUE
      sse.py's lines "epoch userId id" (de-duplicated on userId + id) that
      arrived at or after DUE: a subscriber connects before the seed and
      first gets its channel's buffer (nchan keeps the last 50 messages for 15
      minutes, doc/api.md), e.g. an earlier run's events, before DUE

Prints one line "n p50 p99 max first last rate size": latencies in seconds from
DUE, first/last arrival in seconds from DUE, rate = n / (last - first
arrival) (the channel's delivery rate over the burst), size = mean bytes of a
message as sent (e-mail without the three headers the server adds; SMS the
JSON body), 0 when unknown.  n = 0 prints zeros."""
import json
import os
import sys
import time


def pct(v, p):
    if not v:
        return 0.0
    i = max(0, min(len(v) - 1, int(p / 100.0 * len(v) + 0.999) - 1))
    return v[i]


def report(lat, first_abs, last_abs, due, size):
    lat.sort()
    n = len(lat)
    if n == 0:
        print("0 0 0 0 0 0 0 0")
        return
    span = last_abs - first_abs
    rate = n / span if span > 0 else 0
    print("%d %.2f %.2f %.2f %.2f %.2f %.1f %.0f" % (n, pct(lat, 50), pct(lat, 99), lat[-1],
          first_abs - due, last_abs - due, rate, size))


def mail_files(d, since):
    new = os.path.join(d, "new")
    for name in os.listdir(new):
        p = os.path.join(new, name)
        try:
            st = os.stat(p)
        except OSError:
            continue
        if st.st_mtime_ns / 1e9 >= since:
            yield p, st


def rcpt_of(p):
    """(X-RcptTo lower-cased or None, bytes of the three headers the server adds)"""
    with open(p, "rb") as f:
        head = f.read(4096).split(b"\n\n", 1)[0].split(b"\r\n\r\n", 1)[0]
    rcpt, added = None, 0
    for line in head.splitlines():
        low = line.lower()
        if low.startswith((b"x-peer:", b"x-mailfrom:", b"x-rcptto:")):
            added += len(line) + 1
            if low.startswith(b"x-rcptto:"):
                rcpt = low[9:].strip().decode("ascii", "replace")
    return rcpt, added


def wait(a):
    d, since, dom = a[0], float(a[1]), "@" + a[2].lower()
    want_e, log, off, prefixes = int(a[3]), a[4], int(a[5]), tuple(a[6].split(","))
    want_s, sse, want_i = int(a[7]), a[8], int(a[9])
    due, until = float(a[10]), float(a[11])
    seen, e, s, i, buf = set(), 0, 0, 0, b""
    new = os.path.join(d, "new")
    with open(log, "rb") as f:
        f.seek(off)
        while time.time() < until:
            for ent in os.scandir(new):
                if ent.name in seen:
                    continue
                seen.add(ent.name)
                try:
                    if ent.stat().st_mtime >= since and (rcpt_of(ent.path)[0] or "").endswith(dom):
                        e += 1
                except OSError:
                    pass
            buf += f.read()
            *done, buf = buf.split(b"\n")
            for line in done:
                try:
                    if str((json.loads(line).get("body") or {}).get("to", "")).startswith(prefixes):
                        s += 1
                except ValueError:
                    pass
            try:
                i = len({tuple(x[1:3]) for x in (l.split() for l in open(sse))
                         if len(x) == 3 and float(x[0]) >= due})
            except OSError:
                i = 0
            if e >= want_e and s >= want_s and i >= want_i:
                break
            time.sleep(0.5)
    print(e, s, i)


def main(a):
    if a[0] == "count":
        print(sum(1 for _ in mail_files(a[1], float(a[2]))))
    elif a[0] == "wait":
        wait(a[1:])
    elif a[0] == "email":
        d, since, dom, due = a[1], float(a[2]), "@" + a[3].lower(), float(a[4])
        lat, ts, sizes, mine = [], [], [], []
        for p, st in mail_files(d, since):
            rcpt, added = rcpt_of(p)
            if not rcpt or not rcpt.endswith(dom):
                continue
            t = st.st_mtime_ns / 1e9
            lat.append(t - due)
            ts.append(t)
            sizes.append(st.st_size - added)
            mine.append(p)
        report(lat, min(ts, default=0), max(ts, default=0), due,
               sum(sizes) / len(sizes) if sizes else 0)
        if "--delete" in a:
            for p in mine:
                os.unlink(p)
    elif a[0] == "sms":
        log, off, prefix, due = a[1], int(a[2]), tuple(a[3].split(",")), float(a[4])
        lat, ts, sizes = [], [], []
        with open(log, "rb") as f:
            f.seek(off)
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                b = r.get("body") or {}
                if not str(b.get("to", "")).startswith(prefix):
                    continue
                lat.append(r["ts"] - due)
                ts.append(r["ts"])
                sizes.append(len(json.dumps(b, ensure_ascii=False).encode()))
        report(lat, min(ts, default=0), max(ts, default=0), due,
               sum(sizes) / len(sizes) if sizes else 0)
    elif a[0] == "inapp":
        due, seen, lat, ts = float(a[2]), set(), [], []
        for line in open(a[1]):
            p = line.split()
            if len(p) != 3 or (p[1], p[2]) in seen or float(p[0]) < due:
                continue
            seen.add((p[1], p[2]))
            t = float(p[0])
            lat.append(t - due)
            ts.append(t)
        report(lat, min(ts, default=0), max(ts, default=0), due, 0)
    else:
        sys.exit("burst.py: unknown command " + a[0])


main(sys.argv[1:])

#!/usr/bin/env python3
"""cpusplit.py -- CPU per request by process group from a whole-machine perf profile.

  perf record -a -g -k boot -F 499 -o DATA -- sleep 12 &
  sleep 4; t0=$(cut -d' ' -f1 /proc/uptime)
  wrk -t2 -c32 -d6s URL            # or pgbench ... -T 6
  t1=$(cut -d' ' -f1 /proc/uptime); wait
  tests/bench/cpusplit.py DATA@$t0:$t1 499 REQUESTS API_PID=api NGINX_MASTER=nginx \\
      POSTMASTER=pg comm:wrk=wrk comm:pgbench=pgbench

A sample belongs to the group of the first listed pid among its process's
ancestors (perf's FORK records, so processes that exit during the run --
pgbench, its backends, wrk -- count too: summing /proc/<pid>/stat before and
after a run loses them: doc/performance.md "How the figures are measured"), else to a
listed comm prefix, else to "other" (other work on a shared machine), pid 0 to
"idle".  DATA@T0:T1 keeps the samples of that CLOCK_BOOTTIME window only.
Prints samples, CPU seconds and CPU ms per request (REQUESTS: what the load
tool counted in the window) of every group.
"""
import collections
import re
import subprocess
import sys


def main():
    data, freq, reqs = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    t0 = t1 = None
    if "@" in data:
        data, w = data.split("@")
        t0, t1 = map(float, w.split(":"))
    roots, comms = {}, {}
    for a in sys.argv[4:]:
        k, v = a.split("=")
        if k.startswith("comm:"):
            comms[k[5:]] = v
        else:
            roots[int(k)] = v
    out = subprocess.run(["perf", "script", "-i", data, "--show-task-events",
                          "-F", "pid,tid,comm,time"],
                         capture_output=True, text=True, check=True).stdout
    fork = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")
    sample = re.compile(r"\s*(.*?)\s+(\d+)/(\d+)\s+([0-9.]+):\s*$")
    parent, count, comm = {}, collections.Counter(), {}
    for line in out.splitlines():
        m = fork.search(line)
        if m:
            if m.group(1) != m.group(3):
                parent.setdefault(int(m.group(1)), int(m.group(3)))
            continue
        m = sample.match(line)
        if not m or "PERF_RECORD" in line:
            continue
        if t0 is not None and not t0 <= float(m.group(4)) <= t1:
            continue
        pid = int(m.group(2))
        count[pid] += 1
        comm[pid] = m.group(1)

    def group(pid):
        if pid == 0:
            return "idle"
        p, hops = pid, 0
        while p and hops < 64:
            if p in roots:
                return roots[p]
            p, hops = parent.get(p), hops + 1
        for prefix, g in comms.items():
            if comm.get(pid, "").startswith(prefix):
                return g
        return "other"

    groups = collections.Counter()
    for pid, n in count.items():
        groups[group(pid)] += n
    total = sum(count.values())
    print(f"samples {total}, {total / freq:.2f} CPU s, requests {reqs:.0f}"
          + (f", window {t1 - t0:.2f} s" if t0 is not None else ""))
    for g, n in groups.most_common():
        print(f"{g:10s} {n:6d} samples {100 * n / max(total, 1):5.1f} %"
              f"  {1000 * n / freq / reqs if reqs else 0:.3f} CPU ms/request")


if __name__ == "__main__":
    main()

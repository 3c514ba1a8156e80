#!/usr/bin/env python3
"""mint.py SECRET_FILE ACTOR N [--tenant T] [--perm P]... [--sub S | --sub-prefix P [--sub-first K] | --sub-seq PREFIX [--sub-step K]]

Prints N lines "sub token": HS256 tokens with the claims of `./dev token`
(iss pin-dev, aud pin-calendar, 1 h), a fresh random sub each unless --sub;
--sub-prefix P: sub k (K..K+N-1, K = --sub-first, 1) is P followed by k in 12
digits (P = the first 24 characters of a uuid, e.g. b0000000-0000-4000-8020-);
--sub-seq: sub k (1..N) = PREFIX + k x K (--sub-step, 1) in 12 zero-padded
digits (a uuid's last group).
Minting thousands through ./dev token would spawn a process per token."""
import base64, hashlib, hmac, json, sys, time, uuid


def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def main(a):
    secret = open(a[0]).read().strip().encode()
    actor, n = a[1], int(a[2])
    tenant, sub, prefix, first, seq, step, perms, i = None, None, None, 1, None, 1, [], 3
    while i < len(a):
        if a[i] == "--tenant":
            tenant = a[i + 1]
        elif a[i] == "--perm":
            perms.append(a[i + 1])
        elif a[i] == "--sub":
            sub = a[i + 1]
        elif a[i] == "--sub-prefix":
            prefix = a[i + 1]
        elif a[i] == "--sub-first":
            first = int(a[i + 1])
        elif a[i] == "--sub-seq":
            seq = a[i + 1]
        elif a[i] == "--sub-step":
            step = int(a[i + 1])
        i += 2
    hdr = b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    now = int(time.time())
    out = []
    for j, k in enumerate(range(first, first + n), 1):
        if sub:
            s = sub
        elif prefix:
            s = prefix + "%012d" % k
        elif seq:
            s = "%s%012d" % (seq, j * step)
        else:
            s = str(uuid.uuid4())
        c = {"iss": "pin-dev", "aud": "pin-calendar", "sub": s, "actor": actor}
        if tenant:
            c["tenant_id"] = tenant
        c.update({"permissions": perms, "iat": now, "exp": now + 3600})
        pl = b64(json.dumps(c, separators=(",", ":")).encode())
        sig = b64(hmac.new(secret, (hdr + "." + pl).encode(), hashlib.sha256).digest())
        out.append("%s %s.%s.%s" % (s, hdr, pl, sig))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])

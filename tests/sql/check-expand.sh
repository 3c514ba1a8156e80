#!/bin/sh
# check-expand.sh -- `make check`: migrations are expand-then-contract
# (doc/operating.md, "Upgrading"; sql/README.md).  During an upgrade the
# migrations run while the previous version's hosts still serve, and those
# hosts keep running against the new schema until each is restarted; so a
# versioned migration newer than the last release (sql/released names, per
# schema, the newest file the last release shipped) may only add: tables,
# nullable columns (or NOT NULL with a DEFAULT), indexes, new objects.  A
# statement that would break a host of the previous version is refused
# unless the file says it is a contract step, shipped a release after the
# last host that needed the old shape, with a line of its own near the top:
#   -- contract: <why no running host reads the old shape any more>
# Refused (outside tables the same file creates): DROP TABLE / COLUMN /
# SCHEMA / VIEW / TYPE / FUNCTION / SEQUENCE / DOMAIN, RENAME, a column's
# TYPE changed, SET NOT NULL, DROP DEFAULT, ADD COLUMN ... NOT NULL without
# a DEFAULT, ADD CONSTRAINT (CHECK, UNIQUE, FOREIGN KEY, EXCLUDE, PRIMARY
# KEY), CREATE UNIQUE INDEX, TRUNCATE.  (DROP INDEX and DROP CONSTRAINT only
# loosen: allowed.)
#
# check-expand.sh [SQLDIR]   the versioned files of SQLDIR (default sql/)
#                            newer than sql/released; runs the self-test
#                            first (the check refuses what it must)
# Exit 0 ok, 1 a refused statement (printed), 77 skipped (no python3).
srcdir=${srcdir:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || exit 77
exec python3 - "$srcdir" "${1:-$srcdir/sql}" <<'PYEOF'
import os, re, sys, tempfile

top, sqldir = sys.argv[1], sys.argv[2]

def released(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if len(line) == 2:
                out[line[0]] = line[1]
    return out

CREATED = re.compile(r"\bCREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([\w.\"]+)")
TARGET = re.compile(r"\b(?:ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?|\bON\s+(?:ONLY\s+)?|TRUNCATE\s+(?:TABLE\s+)?(?:ONLY\s+)?)([\w.\"]+)")
RULES = [
    (r"\bDROP\s+(TABLE|SCHEMA|VIEW|MATERIALIZED\s+VIEW|TYPE|FUNCTION|PROCEDURE|SEQUENCE|DOMAIN)\b", "drops an object"),
    (r"\bDROP\s+COLUMN\b", "drops a column"),
    (r"\bRENAME\b", "renames"),
    (r"\bALTER\s+COLUMN\s+[\w\"]+\s+(SET\s+DATA\s+)?TYPE\b", "changes a column's type"),
    (r"\bSET\s+NOT\s+NULL\b", "makes a column NOT NULL"),
    (r"\bALTER\s+COLUMN\s+[\w\"]+\s+DROP\s+DEFAULT\b", "drops a column default"),
    (r"\bADD\s+(CONSTRAINT\s+[\w\"]+\s+)?(CHECK|UNIQUE|FOREIGN\s+KEY|EXCLUDE|PRIMARY\s+KEY)\b", "adds a constraint"),
    (r"\bCREATE\s+UNIQUE\s+INDEX\b", "adds a unique index"),
    (r"\bTRUNCATE\b", "empties a table"),
]

def findings(text):
    """[(statement, reason)] of what text would break for a running host"""
    body = "\n".join(l.split("--", 1)[0] for l in text.splitlines())
    created = {m.group(1).lower().replace('"', "") for m in CREATED.finditer(body)}
    out = []
    for st in body.split(";"):
        st = " ".join(st.split())
        if not st or re.match(r"COMMENT\s+ON\b", st, re.I):
            continue
        t = TARGET.search(st)
        if t and t.group(1).lower().replace('"', "") in created:
            continue
        if re.match(r"CREATE\s+(UNLOGGED\s+)?TABLE\b", st, re.I):
            continue
        for rx, why in RULES:
            if re.search(rx, st, re.I):
                out.append((st, why))
                break
        else:
            for clause in st.split(","):
                if (re.search(r"\bADD\b", clause, re.I) and
                        re.search(r"\bNOT\s+NULL\b", clause, re.I) and
                        not re.search(r"\bDEFAULT\b", clause, re.I)):
                    out.append((st, "adds a NOT NULL column without a DEFAULT"))
                    break
    return out

def is_contract(text):
    return any(re.match(r"--\s*contract:\s*\S", l) for l in text.splitlines()[:20])

def check(sqldir, base):
    bad = 0
    for schema in sorted(os.listdir(sqldir)):
        d = os.path.join(sqldir, schema)
        if not os.path.isdir(d):
            continue
        last = base.get(schema, "")
        for name in sorted(os.listdir(d)):
            m = re.match(r"(\d{4})_.*\.sql$", name)
            if not m or m.group(1) <= last:
                continue
            text = open(os.path.join(d, name)).read()
            if is_contract(text):
                print("ok   %s/%s: a contract step (-- contract:)" % (schema, name))
                continue
            f = findings(text)
            for st, why in f:
                print("FAIL %s/%s %s, which can break a host of the previous version "
                      "(a contract step: a release later, with a line '-- contract: <why>'): %s"
                      % (schema, name, why, st[:160]))
            bad += bool(f)
            if not f:
                print("ok   %s/%s: expand only" % (schema, name))
    return bad

def selftest():
    cases = [
        ("ALTER TABLE calendar.t ADD COLUMN note text;\nCREATE INDEX ix ON calendar.t (note);", 0),
        ("CREATE TABLE calendar.n (id bigint PRIMARY KEY, v text NOT NULL);\n"
         "ALTER TABLE calendar.n ADD CONSTRAINT n_v CHECK (v <> '');\n"
         "CREATE UNIQUE INDEX ux ON calendar.n (v);", 0),
        ("ALTER TABLE calendar.t ADD COLUMN n int NOT NULL DEFAULT 0;", 0),
        ("DROP INDEX IF EXISTS calendar.ix_old;", 0),
        ("ALTER TABLE calendar.t DROP COLUMN note;", 1),
        ("ALTER TABLE calendar.t RENAME COLUMN a TO b;", 1),
        ("ALTER TABLE calendar.t ALTER COLUMN a TYPE bigint;", 1),
        ("ALTER TABLE calendar.t ALTER COLUMN a SET NOT NULL;", 1),
        ("ALTER TABLE calendar.t ADD COLUMN b int NOT NULL;", 1),
        ("ALTER TABLE calendar.t ADD CONSTRAINT c CHECK (a > 0) NOT VALID;", 1),
        ("DROP TABLE calendar.old;", 1),
        ("CREATE UNIQUE INDEX ux ON calendar.t (a);", 1),
        ("-- contract: nothing reads t.note since 0.3 (released 2027-01-10)\n"
         "ALTER TABLE calendar.t DROP COLUMN note;", 0),
    ]
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "calendar"))
        for i, (sql, want) in enumerate(cases):
            p = os.path.join(tmp, "calendar", "%04d_case.sql" % (9000 + i))
            with open(p, "w") as f:
                f.write(sql + "\n")
            with open(os.devnull, "w") as null:
                old, sys.stdout = sys.stdout, null
                try:
                    got = check(tmp, {"calendar": "8999"})
                finally:
                    sys.stdout = old
            os.unlink(p)
            if got != want:
                print("FAIL selftest: %r: %s, expected %s" % (sql, "refused" if got else "passed",
                                                         "refused" if want else "passed"))
                fails += 1
    if not fails:
        print("ok   selftest: %d cases" % len(cases))
    return fails

rc = selftest()
rc += check(sqldir, released(os.path.join(top, "sql", "released")))
sys.exit(1 if rc else 0)
PYEOF

#!/usr/bin/env python3
"""explain.py -- psql input that prints EXPLAIN (ANALYZE, BUFFERS) of the
statements of a pgbench script of tests/bench (./dev bench growth).

    explain.py SCRIPT [--rollback] var=value ...

Each statement of SCRIPT (a showcase/list script is one statement; a
"-- stmt: NAME" line names the next one) is PREPAREd with its :vars turned
into $n -- untyped parameters, as pgbench -M prepared and the host send them
-- executed 6 times (PostgreSQL's plan cache then settles on the custom or
generic plan it will keep) and then EXPLAINed with ANALYZE and BUFFERS.
Writes run inside one transaction that is rolled back (--rollback), so the
data stays as it was.  Values are passed as text literals; a variable a
statement needs but the command line lacks is an error.
"""
import re
import sys


def statements(text):
    """(name, sql) of each statement: comments and meta-commands dropped."""
    out, name, buf = [], None, []
    for line in text.split("\n"):
        m = re.match(r"--\s*stmt:\s*(.+)", line)
        if m:
            name = m.group(1).strip()
            continue
        if line.startswith("--") or line.startswith("\\"):
            continue
        if re.match(r"\s*(BEGIN|COMMIT)\s*;\s*$", line):
            continue
        gset = re.search(r"\\gset\b", line)
        line = re.sub(r"\\gset\b.*", "", line)
        buf.append(line)
        if gset or line.rstrip().endswith(";"):
            sql = "\n".join(buf).strip().rstrip(";")
            if sql:
                out.append((name, sql))
            name, buf = None, []
    return out


def main():
    args = sys.argv[1:]
    script = args.pop(0)
    rollback = "--rollback" in args
    vals = dict(a.split("=", 1) for a in args if "=" in a)
    text = open(script).read()
    print("\\pset pager off")
    if rollback:
        print("BEGIN;")
    for k, (name, sql) in enumerate(statements(text)):
        if not re.search(r"\bFROM\s+calendar\.|\bcalendar\.\w+\s*(AS\s+\w+\s*)?[(\s]|"
                         r"UPDATE\s+calendar\.", sql):
            continue                    # the table-free helper SELECT
        names = []

        def param(m):
            v = m.group(1)
            if v not in vals:
                sys.exit("explain.py: %s needs -D %s" % (script, v))
            if v not in names:
                names.append(v)
            return "$%d" % (names.index(v) + 1)
        psql = re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", param, sql)
        lit = ", ".join("'" + vals[v].replace("'", "''") + "'" for v in names)
        ex = "EXECUTE g%d(%s)" % (k, lit) if names else "EXECUTE g%d" % k
        title = name or script.rsplit("/", 1)[-1]
        print("\\echo '---- %s'" % title.replace("'", ""))
        print("PREPARE g%d AS %s;" % (k, psql))
        writes = re.match(r"\s*(INSERT|UPDATE|DELETE)", psql)
        if not writes:
            for _ in range(6):
                print("\\o /dev/null\n%s;\n\\o" % ex)
        print("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) %s;" % ex)
        print("DEALLOCATE g%d;" % k)
    if rollback:
        print("ROLLBACK;")


main()

#!/bin/sh
# check-sql.sh -- `make check`: the pgbench scripts of tests/bench (the
# anchors of ./dev bench) stay in step with the SQL the code sends.
#
# Each statement of a script follows a line "-- stmt: NAME FILE": the
# statement the C file FILE prepares as NAME (db_exec_prepared("NAME", SQL, ..),
# or a helper's ("NAME", SQL, ..), or a table entry { "NAME", SQL }; SQL as the
# preprocessor expands it, or a `static const char x[]` it names).
# Both sides are compared after: whitespace collapsed, $n (C) and :var
# (pgbench) and NULL turned into ?, a final ; dropped.  "-- stmt: - why"
# marks a statement that is not checked (and says why).
# Exit 0 all equal, 1 a difference (printed), 77 skipped (no cc or python3).
srcdir=${srcdir:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || exit 77
CC=${CC:-cc}
command -v "${CC%% *}" >/dev/null 2>&1 || exit 77
exec python3 - "$srcdir" "$CC" <<'EOF'
import glob, os, re, subprocess, sys

top, cc = sys.argv[1], sys.argv[2]
incs = ["-I" + os.path.join(top, d) for d in ("host/include", "host/core", "host/api", "host/worker", "plugins/sdk/include", "plugins/caldomain/include", ".")]
incs += ["-I/usr/include/postgresql", "-I/usr/include/json-c"]
pre = {}


def expand(path):
    if path not in pre:
        # config.h (HAVE_* only) lives in the build tree: an empty one will do
        import tempfile
        d = tempfile.mkdtemp()
        open(os.path.join(d, "config.h"), "w").close()
        out = subprocess.run(cc.split() + ["-E", "-P", "-I" + d] + incs
                             + [os.path.join(top, path)], capture_output=True, text=True)
        os.unlink(os.path.join(d, "config.h"))
        os.rmdir(d)
        if out.returncode != 0:
            sys.exit("cannot preprocess %s: %s" % (path, out.stderr[-500:]))
        pre[path] = out.stdout
    return pre[path]


def literals(text):
    """the adjacent C string literals at the start of text, concatenated"""
    s, i = "", 0
    while True:
        m = re.match(r'\s*"((?:[^"\\]|\\.)*)"', text[i:])
        if not m:
            return s
        s += m.group(1).replace('\\"', '"').replace("\\\\", "\\")
        i += m.end()


def c_sql(path, name):
    src = expand(path)
    # db_exec_prepared("NAME", SQL, ...), a helper's ("NAME", SQL, ...) or
    # a table's { "NAME", SQL }
    m = re.search(r'[({]\s*"' + re.escape(name) + r'"\s*,', src)
    if not m:
        sys.exit("%s: no (\"%s\", SQL, ...) call" % (path, name))
    rest = src[m.end():]
    sql = literals(rest)
    if not sql:
        ident = re.match(r"\s*([A-Za-z_]\w*)", rest).group(1)
        d = re.search(r"\b" + ident + r"\s*\[\s*\]\s*=", src)
        if not d:
            sys.exit("%s: cannot find the SQL of %s (%s)" % (path, name, ident))
        sql = literals(src[d.end():])
    return sql


def norm(sql, pgbench):
    if pgbench:
        sql = re.sub(r"--[^\n]*", " ", sql)
        # pgbench's prepared mode makes every :name a parameter, inside
        # literals too: a script writes the literal colon as ' || ':' || '
        sql = sql.replace("' || ':' || '", ":")
        sql = re.sub(r"\\gset\b.*", "", sql)
    sql = re.sub(r"\$\d+", "?", sql)
    if pgbench:
        sql = re.sub(r"(?<![:\w]):[A-Za-z_]\w*", "?", sql)
    sql = re.sub(r"\bNULL\b", "?", sql)
    sql = " ".join(sql.split()).rstrip(";").strip()
    sql = re.sub(r"\(\s+", "(", sql)
    sql = re.sub(r"\s+\)", ")", sql)
    return sql


bad = 0
n = 0
for script in sorted(glob.glob(os.path.join(top, "tests/bench/*.sql"))):
    lines = open(script).read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"--\s*stmt:\s*(\S+)\s*(\S*)", lines[i])
        i += 1
        if not m:
            continue
        body = []
        while i < len(lines) and lines[i].strip() and not lines[i].startswith("\\") \
                and not lines[i].startswith("-- stmt:"):
            body.append(lines[i])
            i += 1
        if m.group(1) == "-":
            continue
        n += 1
        want = norm(c_sql(m.group(2), m.group(1)), False)
        got = norm("\n".join(body), True)
        if want != got:
            bad += 1
            print("%s: statement %s differs from %s\n  code:   %s\n  script: %s"
                  % (os.path.basename(script), m.group(1), m.group(2), want, got))
print("check-sql: %d statements compared, %d differ" % (n, bad))
sys.exit(1 if bad or n == 0 else 0)
EOF

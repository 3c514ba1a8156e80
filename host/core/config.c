/* config.c -- declared configuration: key = value files, PIN_<KEY>
 * environment, command-line flags, each value checked against the key's
 * declaration (config_keys.c for the host's keys, the plugins'
 * descriptors for theirs; struct pin_config_key in pin/plugin.h).
 *
 * Precedence: flag (pin_config_set) > environment > file > default.  The
 * first of them that is set decides; an empty value there means "unset":
 * the declared default applies.  "include = FILE" reads FILE at that line
 * (instance files include the common pin-host.conf); later lines win.
 *
 * pin_config_check() refuses an unknown key, a value of the wrong type or
 * out of range, naming file, line and key, with a "did you mean" for a
 * near miss.  Only the environment variables named after a declared key
 * (PIN_ + the key upper-cased, '.' and '-' as '_') are read; other PIN_*
 * variables belong to the dev stack and the tests and are ignored
 * (--check-config warns about near misses).
 *
 * Loaded on the main thread before any other thread starts; pin_config_check
 * resolves every key, after which everything here is read-only. */
#include "config.h"
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <libpq-fe.h>
#include "core.h"

extern char **environ;

enum src { SRC_DEFAULT, SRC_FILE, SRC_ENV, SRC_FLAG };

/* one line of a file (every occurrence is kept: each is checked) */
struct fent {
	char *key;
	char *val;
	const char *path;           /* interned in files[] */
	int line;
	int depth;                  /* 0: the file given, 1+: included */
};

struct fset {
	char *key;
	char *val;
};

/* one declared key */
struct decl {
	struct pin_config_key k;
	const char *owner;          /* "pin-host" or the plugin's name */
	bool copied;                /* k's strings are ours (a plugin's) */
	char env[160];
	/* resolved (gen == cfg_gen) */
	unsigned gen;
	enum src src;
	const struct fent *fe;      /* SRC_FILE */
	const char *raw;            /* what the source said (may be "") */
	const char *val;            /* effective: raw, or the default when empty */
	long long num;
};

static struct fent *fents;
static size_t nfents;
static char **files;
static size_t nfiles;
static struct fset *flags;
static size_t nflags;
static struct decl *decls;
static size_t ndecls, cdecls;
static size_t *order;           /* indexes of decls sorted by name */
static char **owners;           /* plugin names that declared keys */
static size_t nowners;
static char **oldplug;          /* plugins that declare nothing (< 1.7) */
static size_t noldplug;
static unsigned cfg_gen = 1;
static bool host_declared;

/* Reload (pin_config_reload): the file lines of earlier generations stay
 * allocated until pin_config_free, because a value read before a reload may
 * still be in use by a thread; fents_mu orders a reload against the readers
 * of the file lines themselves (undeclared keys). */
struct fileset {
	struct fent *fents;
	size_t nfents;
	char **files;
	size_t nfiles;
};
static struct fileset *retired;
static size_t nretired;
static pthread_mutex_t fents_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t reload_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long generation = 1;   /* 1: the configuration of the start */

static pthread_mutex_t warn_mu = PTHREAD_MUTEX_INITIALIZER;
static char **warned;           /* undeclared keys already logged */
static size_t nwarned;

extern const struct pin_config_key pin_config_host_keys[];

/* ---------------------------------------------------------------- helpers */

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static void env_name(const char *key, char *out, size_t len)
{
	size_t i = 0, o = 4;

	memcpy(out, "PIN_", 4);
	for (; key[i] && o + 1 < len; i++) {
		char c = key[i];
		out[o++] = (c == '.' || c == '-') ? '_' : (char)toupper((unsigned char)c);
	}
	out[o] = '\0';
}

static int cmp_order(const void *a, const void *b)
{
	return strcmp(decls[*(const size_t *)a].k.name, decls[*(const size_t *)b].k.name);
}

static void reindex(void)
{
	size_t *o = realloc(order, (ndecls ? ndecls : 1) * sizeof *o);

	if (!o)
		return;
	order = o;
	for (size_t i = 0; i < ndecls; i++)
		order[i] = i;
	qsort(order, ndecls, sizeof *order, cmp_order);
}

static int add_decl(const struct pin_config_key *k, const char *owner, bool copy);

static void declare_host(void)
{
	if (host_declared)
		return;
	host_declared = true;
	for (const struct pin_config_key *k = pin_config_host_keys; k->name; k++)
		add_decl(k, "pin-host", false);
	reindex();
}

static struct decl *find_decl(const char *key)
{
	size_t lo = 0, hi;

	declare_host();
	hi = ndecls;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(key, decls[order[mid]].k.name);

		if (c == 0)
			return &decls[order[mid]];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

bool pin_config_declared(const char *key)
{
	return key && find_decl(key) != NULL;
}

static const struct fent *last_fent(const char *key)
{
	for (size_t i = nfents; i-- > 0;)
		if (!strcmp(fents[i].key, key))
			return &fents[i];
	return NULL;
}

static const char *flag_of(const char *key)
{
	for (size_t i = nflags; i-- > 0;)
		if (!strcmp(flags[i].key, key))
			return flags[i].val;
	return NULL;
}

static bool is_number(const char *v, long long *out)
{
	char *end;
	long long n;

	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno || end == v)
		return false;
	while (isspace((unsigned char)*end))
		end++;
	if (*end)
		return false;
	*out = n;
	return true;
}

static int parse_bool(const char *v)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };
	char b[8];
	size_t n = strlen(v);

	while (n && isspace((unsigned char)v[n - 1]))
		n--;
	if (n >= sizeof b)
		return -1;
	memcpy(b, v, n);
	b[n] = '\0';
	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(b, yes[i]))
			return 1;
		if (!strcasecmp(b, no[i]))
			return 0;
	}
	return -1;
}

/* v is one of the '|'-separated words of list */
static bool in_list(const char *list, const char *v, size_t vlen)
{
	const char *p = list;

	while (p && *p) {
		const char *e = strchr(p, '|');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == vlen && !strncmp(p, v, l))
			return true;
		p = e ? e + 1 : NULL;
	}
	return false;
}

static bool bounded(const struct pin_config_key *k)
{
	return k->min != 0 || k->max != 0;
}

/* Checks v (non-empty) against k.  0 ok; -1 with why (never the value of
 * a secret). */
static int check_value(const struct pin_config_key *k, const char *v, char *why, size_t len)
{
	long long n;

	switch (k->type) {
	case PIN_CFG_STRING:
	case PIN_CFG_PATH:
	case PIN_CFG_LIST:
		for (const char *p = v; *p; p++)
			if ((unsigned char)*p < 0x20 && *p != '\t') {
				snprintf(why, len, "contains a control character");
				return -1;
			}
		/* bounds of a string: its length in bytes */
		if (bounded(k) && ((long long)strlen(v) < k->min || (long long)strlen(v) > k->max)) {
			snprintf(why, len, "must be %lld to %lld bytes long", k->min, k->max);
			return -1;
		}
		return 0;
	case PIN_CFG_INT:
	case PIN_CFG_DURATION:
		if (!is_number(v, &n)) {
			if (k->type == PIN_CFG_DURATION)
				snprintf(why, len, "is not a whole number of %s",
					k->unit ? k->unit : "units");
			else
				snprintf(why, len, "is not an integer");
			return -1;
		}
		if (bounded(k) && (n < k->min || n > k->max)) {
			snprintf(why, len, "is out of range %lld..%lld", k->min, k->max);
			return -1;
		}
		return 0;
	case PIN_CFG_OCTAL: {
		char *end;

		errno = 0;
		n = strtoll(v, &end, 8);
		if (errno || end == v || *end || strspn(v, "01234567") != strlen(v)) {
			snprintf(why, len, "is not an octal mode like 0660");
			return -1;
		}
		if (bounded(k) && (n < k->min || n > k->max)) {
			snprintf(why, len, "is out of range %llo..%llo", k->min, k->max);
			return -1;
		}
		return 0;
	}
	case PIN_CFG_BOOL:
		if (parse_bool(v) < 0) {
			snprintf(why, len, "is not a boolean (true/false, yes/no, on/off, 1/0)");
			return -1;
		}
		return 0;
	case PIN_CFG_ENUM:
		if (!in_list(k->values, v, strlen(v))) {
			snprintf(why, len, "is not one of %s", k->values ? k->values : "(none)");
			return -1;
		}
		return 0;
	case PIN_CFG_URL: {
		const char *s = strstr(v, "://");
		size_t sl = s ? (size_t)(s - v) : 0;

		if (!s || sl == 0 || !isalpha((unsigned char)v[0]) ||
		    strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789+.-") < sl ||
		    !s[3] || strpbrk(v, " \t\r\n")) {
			snprintf(why, len, "is not a URL (scheme://host...)");
			return -1;
		}
		if (k->values && !in_list(k->values, v, sl)) {
			snprintf(why, len, "has a scheme other than %s", k->values);
			return -1;
		}
		return 0;
	}
	case PIN_CFG_DSN: {
		char *err = NULL;
		PQconninfoOption *o = PQconninfoParse(v, &err);

		if (!o) {
			snprintf(why, len, "is not a libpq connection string "
				"(key=value pairs or a postgresql:// URI)");
			PQfreemem(err);
			return -1;
		}
		PQconninfoFree(o);
		return 0;
	}
	case PIN_CFG_ADDR: {
		const char *colon;

		if (k->values && in_list(k->values, "unix", 4) &&
		    (!strncmp(v, "unix:/", 6) || v[0] == '/'))
			return 0;
		/* host:port; ":port" is every interface */
		colon = strrchr(v, ':');
		if (!colon || !is_number(colon + 1, &n) || n < 1 || n > 65535) {
			snprintf(why, len, "is not host:port%s",
				k->values && in_list(k->values, "unix", 4) ?
				" or unix:/path" : "");
			return -1;
		}
		return 0;
	}
	default:
		snprintf(why, len, "has an unknown type");
		return -1;
	}
}

static long long num_of(const struct pin_config_key *k, const char *v)
{
	long long n = 0;

	if (!v || !*v)
		return 0;
	if (k->type == PIN_CFG_BOOL)
		return parse_bool(v) == 1;
	if (k->type == PIN_CFG_OCTAL)
		return strtoll(v, NULL, 8);
	if (!is_number(v, &n))
		return 0;
	return n;
}

static const char *def_of(const struct pin_config_key *k)
{
	return k->def ? k->def : "";
}

/* d resolved from the flags, the environment and the file lines now loaded
 * (in that order; raw NULL when none is set), into *out */
static void resolve_into(const struct decl *d, struct decl *out)
{
	const char *f, *e;
	char why[160];

	*out = *d;
	out->fe = NULL;
	out->raw = NULL;
	if ((f = flag_of(d->k.name))) {
		out->src = SRC_FLAG;
		out->raw = f;
	} else if ((e = getenv(d->env))) {
		out->src = SRC_ENV;
		out->raw = e;
	} else if ((out->fe = last_fent(d->k.name))) {
		out->src = SRC_FILE;
		out->raw = out->fe->val;
	} else {
		out->src = SRC_DEFAULT;
	}
	out->val = out->raw;
	if (!out->val || !*out->val || check_value(&d->k, out->val, why, sizeof why) < 0)
		out->val = def_of(&d->k);
	out->num = num_of(&d->k, out->val);
}

static void resolve(struct decl *d)
{
	struct decl r;

	if (d->gen == cfg_gen)
		return;
	resolve_into(d, &r);
	d->src = r.src;
	d->fe = r.fe;
	d->raw = r.raw;
	d->val = r.val;
	d->num = r.num;
	d->gen = cfg_gen;
}

static void invalidate(void)
{
	if (++cfg_gen == 0)
		cfg_gen = 1;
}

/* logs once per key that an undeclared key was read (a bug, or an old
 * plugin's own key) */
static void warn_undeclared(const char *key)
{
	bool first = true;

	pthread_mutex_lock(&warn_mu);
	for (size_t i = 0; i < nwarned; i++)
		if (!strcmp(warned[i], key))
			first = false;
	if (first) {
		char **w = realloc(warned, (nwarned + 1) * sizeof *w);

		if (w) {
			warned = w;
			warned[nwarned++] = strdup(key);
		}
	}
	pthread_mutex_unlock(&warn_mu);
	if (first)
		pin_log(noldplug ? PIN_LOG_WARN : PIN_LOG_ERROR,
			noldplug ? "read of an undeclared configuration key" :
			"read of an undeclared configuration key (a bug: declare it)",
			"key", key, NULL);
}

/* -------------------------------------------------------------- declaring */

static bool name_ok(const char *n)
{
	if (!n || !*n || strlen(n) > 120)
		return false;
	for (const char *p = n; *p; p++)
		if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) &&
		    *p != '_' && *p != '.' && *p != '-')
			return false;
	return isalpha((unsigned char)n[0]);
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int add_decl(const struct pin_config_key *k, const char *owner, bool copy)
{
	struct decl *d;

	if (ndecls == cdecls) {
		size_t c = cdecls ? cdecls * 2 : 128;
		struct decl *n = realloc(decls, c * sizeof *n);

		if (!n)
			return -1;
		decls = n;
		cdecls = c;
	}
	d = &decls[ndecls];
	memset(d, 0, sizeof *d);
	d->k = *k;
	d->owner = owner;
	d->copied = copy;
	if (copy) {
		d->k.name = strdup(k->name);
		d->k.def = dup_or_null(k->def);
		d->k.values = dup_or_null(k->values);
		d->k.unit = dup_or_null(k->unit);
		d->k.group = dup_or_null(k->group);
		d->k.desc = dup_or_null(k->desc);
	}
	if (!d->k.modes)
		d->k.modes = PIN_CFG_ALL;
	env_name(d->k.name, d->env, sizeof d->env);
	ndecls++;
	return 0;
}

/* A declaration's own consistency: 0, or -1 with why. */
static int decl_ok(const struct pin_config_key *k, char *why, size_t len)
{
	char w[160];

	if (!name_ok(k->name)) {
		snprintf(why, len, "invalid key name (want [a-z][a-z0-9_.-]*)");
		return -1;
	}
	if (k->type < PIN_CFG_STRING || k->type > PIN_CFG_ADDR) {
		snprintf(why, len, "%s: unknown type %d", k->name, k->type);
		return -1;
	}
	if (k->type == PIN_CFG_ENUM && (!k->values || !*k->values)) {
		snprintf(why, len, "%s: an enum without values", k->name);
		return -1;
	}
	if (bounded(k) && k->min > k->max) {
		snprintf(why, len, "%s: min > max", k->name);
		return -1;
	}
	if (!k->desc || !*k->desc) {
		snprintf(why, len, "%s: no description", k->name);
		return -1;
	}
	if (k->def && *k->def && check_value(k, k->def, w, sizeof w) < 0) {
		snprintf(why, len, "%s: its default %s", k->name, w);
		return -1;
	}
	return 0;
}

bool pin_config_owner_declared(const char *owner)
{
	for (size_t i = 0; i < nowners; i++)
		if (!strcmp(owners[i], owner))
			return true;
	return false;
}

int pin_config_declare(const char *owner, const struct pin_config_key *keys,
		size_t stride, char *err, size_t errlen)
{
	const char *own;
	char **o;
	int rc = 0;

	declare_host();
	if (pin_config_owner_declared(owner))
		return 0;
	o = realloc(owners, (nowners + 1) * sizeof *o);
	if (!o)
		return -1;
	owners = o;
	own = owners[nowners++] = strdup(owner);
	if (!keys)
		return 0;
	if (stride < offsetof(struct pin_config_key, desc) + sizeof(keys->desc)) {
		snprintf(err, errlen, "config_key_size %zu is too small", stride);
		return -1;
	}
	for (const char *p = (const char *)keys;; p += stride) {
		const struct pin_config_key *k = (const struct pin_config_key *)(const void *)p;
		struct decl *dup;
		char why[256];

		if (!k->name)
			break;
		if (decl_ok(k, why, sizeof why) < 0) {
			snprintf(err, errlen, "invalid configuration key: %s", why);
			rc = -1;
			continue;
		}
		if ((dup = find_decl(k->name))) {
			/* the same key twice: the first declaration stays; a host
			 * key cannot be redeclared */
			if (!strcmp(dup->owner, "pin-host") || dup->k.type != k->type ||
			    strcmp(def_of(&dup->k), k->def ? k->def : "")) {
				snprintf(err, errlen, "configuration key %s is declared by %s already",
					k->name, dup->owner);
				rc = -1;
			}
			continue;
		}
		if (add_decl(k, own, true) < 0)
			return -1;
		reindex();
		/* resolved now, on the declaring (main) thread: the others only
		 * ever read */
		resolve(find_decl(k->name));
	}
	return rc;
}

void pin_config_note_undeclaring(const char *plugin)
{
	char **o;

	for (size_t i = 0; i < noldplug; i++)
		if (!strcmp(oldplug[i], plugin))
			return;
	o = realloc(oldplug, (noldplug + 1) * sizeof *o);
	if (!o)
		return;
	oldplug = o;
	oldplug[noldplug++] = strdup(plugin);
}

/* ---------------------------------------------------------------- loading */

static int load_file(const char *path, int depth);

static const char *intern_path(const char *path)
{
	char **n;

	for (size_t i = 0; i < nfiles; i++)
		if (!strcmp(files[i], path))
			return files[i];
	n = realloc(files, (nfiles + 1) * sizeof *n);
	if (!n)
		return NULL;
	files = n;
	files[nfiles] = strdup(path);
	return files[nfiles++];
}

/* "include = FILE": loads FILE where the line stands (later lines win);
 * a relative FILE is relative to the including file's directory. */
static int load_include(const char *path, int line, const char *inc, int depth)
{
	char full[4096], lno[16];
	const char *slash = strrchr(path, '/');

	if (depth >= 4) {
		snprintf(lno, sizeof lno, "%d", line);
		pin_log(PIN_LOG_ERROR, "config include nested too deep", "path", path,
			"line", lno, NULL);
		return -1;
	}
	if (inc[0] == '/' || !slash)
		snprintf(full, sizeof full, "%s", inc);
	else
		snprintf(full, sizeof full, "%.*s/%s", (int)(slash - path), path, inc);
	return load_file(full, depth + 1);
}

int pin_config_load(const char *path)
{
	invalidate();
	return load_file(path, 0);
}

static int load_file(const char *path, int depth)
{
	FILE *f = fopen(path, "r");
	const char *ipath;
	char line[4096], lno[16];
	int n = 0, rc = 0;

	if (!f) {
		pin_log(PIN_LOG_ERROR, "cannot open config file", "path", path,
			"error", strerror(errno), NULL);
		return -1;
	}
	ipath = intern_path(path);
	while (ipath && fgets(line, sizeof line, f)) {
		char *s = trim(line), *eq, *k, *v;
		struct fent *e;

		n++;
		if (*s == '\0' || *s == '#' || *s == ';')
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			snprintf(lno, sizeof lno, "%d", n);
			pin_log(PIN_LOG_ERROR, "config line is not key = value",
				"path", path, "line", lno, NULL);
			rc = -1;
			break;
		}
		*eq = '\0';
		k = trim(s);
		v = trim(eq + 1);
		if (*k == '\0') {
			snprintf(lno, sizeof lno, "%d", n);
			pin_log(PIN_LOG_ERROR, "config line has an empty key",
				"path", path, "line", lno, NULL);
			rc = -1;
			break;
		}
		/* optional surrounding quotes */
		size_t vl = strlen(v);
		if (vl >= 2 && ((v[0] == '"' && v[vl - 1] == '"') ||
				(v[0] == '\'' && v[vl - 1] == '\''))) {
			v[vl - 1] = '\0';
			v++;
		}
		if (!strcmp(k, "include")) {
			if (load_include(path, n, v, depth) < 0) {
				rc = -1;
				break;
			}
			continue;
		}
		e = realloc(fents, (nfents + 1) * sizeof *e);
		if (!e) {
			rc = -1;
			break;
		}
		fents = e;
		fents[nfents] = (struct fent){ strdup(k), strdup(v), ipath, n, depth };
		nfents++;
	}
	fclose(f);
	return ipath ? rc : -1;
}

int pin_config_set(const char *key, const char *value)
{
	struct fset *n;

	invalidate();
	for (size_t i = 0; i < nflags; i++)
		if (!strcmp(flags[i].key, key)) {
			free(flags[i].val);
			flags[i].val = value ? strdup(value) : NULL;
			if (!value) {
				free(flags[i].key);
				flags[i] = flags[--nflags];
			}
			return 0;
		}
	if (!value)
		return 0;
	n = realloc(flags, (nflags + 1) * sizeof *n);
	if (!n)
		return -1;
	flags = n;
	flags[nflags].key = strdup(key);
	flags[nflags].val = strdup(value);
	nflags++;
	return 0;
}

/* ---------------------------------------------------------------- reading */

const char *pin_config_str(const char *key)
{
	struct decl *d = find_decl(key);

	if (!d) {
		warn_undeclared(key);
		return "";
	}
	resolve(d);
	return __atomic_load_n(&d->val, __ATOMIC_ACQUIRE);
}

long long pin_config_int(const char *key)
{
	struct decl *d = find_decl(key);

	if (!d) {
		warn_undeclared(key);
		return 0;
	}
	resolve(d);
	return __atomic_load_n(&d->num, __ATOMIC_ACQUIRE);
}

bool pin_config_bool(const char *key)
{
	return pin_config_int(key) != 0;
}

/* an undeclared key (old plugins): flag, PIN_<KEY>, last file line */
static const char *undeclared_raw(const char *key)
{
	char env[160];
	const char *v;
	const struct fent *fe;

	if ((v = flag_of(key)))
		return v;
	env_name(key, env, sizeof env);
	if ((v = getenv(env)))
		return v;
	pthread_mutex_lock(&fents_mu);
	fe = last_fent(key);
	v = fe ? fe->val : NULL;
	pthread_mutex_unlock(&fents_mu);
	return v;
}

const char *pin_config_get(const char *key, const char *def)
{
	struct decl *d = find_decl(key);
	const char *v;

	if (!d) {
		warn_undeclared(key);
		v = undeclared_raw(key);
		return v ? v : def;
	}
	resolve(d);
	v = __atomic_load_n(&d->val, __ATOMIC_ACQUIRE);
	return *v ? v : def;
}

long long pin_config_int_def(const char *key, long long def)
{
	struct decl *d = find_decl(key);
	const char *v;
	long long n;

	if (!d) {
		warn_undeclared(key);
		v = undeclared_raw(key);
		return v && is_number(v, &n) ? n : def;
	}
	resolve(d);
	return *d->val ? d->num : def;
}

/* -------------------------------------------------------------- checking */

static size_t levenshtein(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), prev[130], cur[130];

	if (la > 128 || lb > 128)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t c = prev[j - 1] + (a[i - 1] != b[j - 1]);

			if (prev[j] + 1 < c)
				c = prev[j] + 1;
			if (cur[j - 1] + 1 < c)
				c = cur[j - 1] + 1;
			cur[j] = c;
		}
		memcpy(prev, cur, (lb + 1) * sizeof *prev);
	}
	return prev[lb];
}

/* the declared key nearest to key (Levenshtein <= 2, and less than a
 * third of its length), or NULL */
static const char *near_key(const char *key)
{
	const char *best = NULL;
	size_t bd = 3, kl = strlen(key);

	for (size_t i = 0; i < ndecls; i++) {
		size_t nl = strlen(decls[i].k.name);
		size_t d = (nl > kl ? nl - kl : kl - nl) > 2 ? SIZE_MAX :
			levenshtein(key, decls[i].k.name);

		if (d < bd && d * 3 < kl) {
			bd = d;
			best = decls[i].k.name;
		}
	}
	if (!best && levenshtein(key, "include") <= 2)
		best = "include";
	return best;
}

struct checker {
	FILE *text;                 /* --check-config: human lines; NULL: the log */
	int errors;
	int warnings;
};

/* One finding.  Human line (--check-config), like nginx -t:
 *   pin-host: [error] unknown key "db_concurency" in /etc/x.conf:12 (did you mean "db_concurrency"?)
 * else a log line (msg, key, in, problem, hint). */
static void report(struct checker *c, bool error, const char *msg, const char *pre,
		const char *key, const char *where, const char *detail, const char *hint)
{
	char h[240];

	if (error)
		c->errors++;
	else
		c->warnings++;
	if (c->text) {
		fprintf(c->text, "pin-host: [%s] %s \"%s\" in %s%s%s%s%s%s\n",
			error ? "error" : "warn", pre, key, where,
			detail ? ": " : "", detail ? detail : "",
			hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
		return;
	}
	/* a NULL name ends pin_log's pairs: the optional ones go last */
	snprintf(h, sizeof h, "%s", hint ? hint : "");
	pin_log(error ? PIN_LOG_ERROR : PIN_LOG_WARN, msg, "key", key, "in", where,
		detail ? "problem" : hint ? "hint" : NULL, detail ? detail : h,
		detail && hint ? "hint" : NULL, h, NULL);
}

static void redact_dsn(const char *v, char *out, size_t len);

static void quoted(char *out, size_t len, const struct pin_config_key *k, const char *v)
{
	if (k->flags & PIN_CFG_SECRET || k->type == PIN_CFG_DSN)
		snprintf(out, len, "invalid value of key");
	else if (strlen(v) > 60)
		snprintf(out, len, "invalid value \"%.57s...\" of key", v);
	else
		snprintf(out, len, "invalid value \"%s\" of key", v);
}

static void check_one(struct checker *c, const struct decl *d, const char *v,
		const char *where)
{
	char why[200], pre[120];

	if (!v || !*v)
		return;
	if (check_value(&d->k, v, why, sizeof why) < 0) {
		quoted(pre, sizeof pre, &d->k, v);
		report(c, true, "configuration: invalid value", pre, d->k.name, where,
			why, NULL);
	}
}

static const char *mode_words(unsigned m, char *out, size_t len)
{
	out[0] = '\0';
	if ((m & PIN_CFG_ALL) == PIN_CFG_ALL) {
		snprintf(out, len, "all");
		return out;
	}
	if (m & PIN_CFG_API)
		snprintf(out + strlen(out), len - strlen(out), "api");
	if (m & PIN_CFG_WORKER)
		snprintf(out + strlen(out), len - strlen(out), "%sworker", *out ? ", " : "");
	if (m & PIN_CFG_MIGRATE)
		snprintf(out + strlen(out), len - strlen(out), "%smigrate", *out ? ", " : "");
	return out;
}

int pin_config_check(unsigned mode, FILE *text)
{
	struct checker c = { text, 0, 0 };
	char where[4200], hint[200];

	declare_host();
	invalidate();
	for (size_t i = 0; i < nfents; i++) {
		const struct fent *e = &fents[i];
		const struct decl *d = find_decl(e->key);

		snprintf(where, sizeof where, "%s:%d", e->path, e->line);
		if (!d) {
			const char *near = near_key(e->key);

			if (near)
				snprintf(hint, sizeof hint, "did you mean \"%s\"?", near);
			if (noldplug && !near) {
				snprintf(hint, sizeof hint, "accepted: plugin %s declares no keys "
					"(ABI < 1.7)", oldplug[0]);
				report(&c, false, "configuration: undeclared key", "undeclared key",
					e->key, where, NULL, hint);
			} else {
				report(&c, true, "configuration: unknown key", "unknown key",
					e->key, where, NULL, near ? hint : NULL);
			}
			continue;
		}
		check_one(&c, d, e->val, where);
		if (text && mode && e->depth == 0 && !(d->k.modes & mode)) {
			char m[40];

			snprintf(hint, sizeof hint, "it applies to: %s",
				mode_words(d->k.modes, m, sizeof m));
			report(&c, false, "configuration: key of another mode", "key", e->key,
				where, "ignored in this mode", hint);
		}
	}
	for (size_t i = 0; i < nflags; i++) {
		const struct decl *d = find_decl(flags[i].key);

		snprintf(where, sizeof where, "flag --");
		for (const char *p = flags[i].key; *p && strlen(where) + 2 < sizeof where; p++) {
			size_t l = strlen(where);

			where[l] = *p == '_' ? '-' : *p;
			where[l + 1] = '\0';
		}
		if (!d)
			report(&c, true, "configuration: unknown key", "unknown key",
				flags[i].key, where, NULL, NULL);
		else
			check_one(&c, d, flags[i].val, where);
	}
	for (size_t i = 0; i < ndecls; i++) {
		const char *v = getenv(decls[i].env);

		if (v && !flag_of(decls[i].k.name)) {
			snprintf(where, sizeof where, "environment %s", decls[i].env);
			check_one(&c, &decls[i], v, where);
		}
	}
	if (text) {
		/* PIN_* variables one or two letters off a key's variable */
		for (char **ep = environ; ep && *ep; ep++) {
			char name[160];
			const char *eq = strchr(*ep, '=');
			size_t nl = eq ? (size_t)(eq - *ep) : 0;
			const char *best = NULL;
			size_t bd = 3;
			bool exact = false;

			if (nl < 5 || nl >= sizeof name || strncmp(*ep, "PIN_", 4))
				continue;
			memcpy(name, *ep, nl);
			name[nl] = '\0';
			for (size_t j = 0; j < ndecls && !exact; j++) {
				size_t el = strlen(decls[j].env), dd;

				dd = (el > nl ? el - nl : nl - el) > 2 ? SIZE_MAX :
					levenshtein(name + 4, decls[j].env + 4);

				exact = dd == 0;
				if (dd < bd && dd * 3 < nl - 4) {
					bd = dd;
					best = decls[j].env;
				}
			}
			if (!exact && best) {
				snprintf(hint, sizeof hint, "did you mean %s?", best);
				report(&c, false, "configuration: unknown variable", "variable",
					name, "the environment", "not a configuration key, ignored",
					hint);
			}
		}
	}
	for (size_t i = 0; i < ndecls; i++)
		resolve(&decls[i]);
	return c.errors;
}

/* -------------------------------------------------------------- reload */

static void fileset_free(struct fileset *f)
{
	for (size_t i = 0; i < f->nfents; i++) {
		free(f->fents[i].key);
		free(f->fents[i].val);
	}
	free(f->fents);
	for (size_t i = 0; i < f->nfiles; i++)
		free(f->files[i]);
	free(f->files);
	memset(f, 0, sizeof *f);
}

static void retire(const struct fileset *f)
{
	struct fileset *n = realloc(retired, (nretired + 1) * sizeof *n);

	if (!n) {
		/* cannot keep it: leaking is safe, freeing is not */
		pin_log(PIN_LOG_WARN, "configuration: out of memory keeping an old "
			"generation", NULL);
		return;
	}
	retired = n;
	retired[nretired++] = *f;
}

static void store(struct decl *d, const struct decl *from)
{
	d->src = from->src;
	d->fe = from->fe;
	d->raw = from->raw;
	__atomic_store_n(&d->num, from->num, __ATOMIC_RELEASE);
	__atomic_store_n(&d->val, from->val, __ATOMIC_RELEASE);
}

unsigned long pin_config_generation(void)
{
	return __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
}

int pin_config_reload(const char *path, unsigned mode, int (*apply)(void),
		struct pin_config_reload_result *res)
{
	struct fileset old, neu;
	struct checker c = { NULL, 0, 0 };
	struct decl *was = NULL, *now = NULL;
	bool *changed = NULL;
	char where[4200], hint[200], num[24], num2[24];
	int rc = -1;

	memset(res, 0, sizeof *res);
	pthread_mutex_lock(&reload_mu);
	was = calloc(ndecls ? ndecls : 1, sizeof *was);
	now = calloc(ndecls ? ndecls : 1, sizeof *now);
	changed = calloc(ndecls ? ndecls : 1, sizeof *changed);
	if (!was || !now || !changed) {
		snprintf(res->why, sizeof res->why, "out of memory");
		goto out;
	}

	/* the new file lines, beside the running ones */
	pthread_mutex_lock(&fents_mu);
	old = (struct fileset){ fents, nfents, files, nfiles };
	fents = NULL;
	nfents = 0;
	files = NULL;
	nfiles = 0;
	if (load_file(path, 0) < 0) {
		snprintf(res->why, sizeof res->why, "the file cannot be read or parsed");
		goto refuse_locked;
	}
	for (size_t i = 0; i < nfents; i++) {
		const struct fent *e = &fents[i];
		const struct decl *d = find_decl(e->key);

		snprintf(where, sizeof where, "%s:%d", e->path, e->line);
		if (!d) {
			const char *near = near_key(e->key);

			if (near)
				snprintf(hint, sizeof hint, "did you mean \"%s\"?", near);
			report(&c, !noldplug, "configuration: unknown key", "unknown key",
				e->key, where, NULL, near ? hint : NULL);
			continue;
		}
		check_one(&c, d, e->val, where);
	}
	if (c.errors) {
		snprintf(res->why, sizeof res->why, "%d invalid line(s), logged", c.errors);
		goto refuse_locked;
	}

	/* what changes: a reloadable key takes its new value; any other keeps
	 * the running one until a restart */
	for (size_t i = 0; i < ndecls; i++) {
		struct decl *d = &decls[i];

		if (mode && !(d->k.modes & mode))
			continue;
		resolve_into(d, &now[i]);
		if (!strcmp(now[i].val, d->val))
			continue;
		if (!(d->k.flags & PIN_CFG_RELOAD)) {
			pin_log(PIN_LOG_WARN, "configuration: key needs a restart, "
				"keeps its running value", "key", d->k.name, NULL);
			res->restart_only++;
			continue;
		}
		changed[i] = true;
		res->applied++;
	}
	neu = (struct fileset){ fents, nfents, files, nfiles };
	pthread_mutex_unlock(&fents_mu);

	for (size_t i = 0; i < ndecls; i++)
		if (changed[i]) {
			was[i] = decls[i];
			store(&decls[i], &now[i]);
		}
	if (apply && apply() < 0) {
		/* a component refused the new values: all of them go back */
		for (size_t i = 0; i < ndecls; i++)
			if (changed[i])
				store(&decls[i], &was[i]);
		snprintf(res->why, sizeof res->why, "the new values were refused where "
			"they apply (logged)");
		pthread_mutex_lock(&fents_mu);
		fents = old.fents;
		nfents = old.nfents;
		files = old.files;
		nfiles = old.nfiles;
		pthread_mutex_unlock(&fents_mu);
		retire(&neu);          /* its values were live for a moment */
		goto refused;
	}
	for (size_t i = 0; i < ndecls; i++)
		if (changed[i])
			pin_log(PIN_LOG_INFO, "configuration: key reloaded", "key",
				decls[i].k.name, NULL);
	retire(&old);
	res->generation = __atomic_add_fetch(&generation, 1, __ATOMIC_ACQ_REL);
	snprintf(num, sizeof num, "%lu", res->generation);
	snprintf(num2, sizeof num2, "%d", res->applied);
	snprintf(where, sizeof where, "%d", res->restart_only);
	pin_log(PIN_LOG_INFO, "configuration reloaded", "generation", num,
		"keys_applied", num2, "keys_needing_restart", where, "config", path, NULL);
	rc = 0;
	goto out;

refuse_locked:
	neu = (struct fileset){ fents, nfents, files, nfiles };
	fents = old.fents;
	nfents = old.nfents;
	files = old.files;
	nfiles = old.nfiles;
	pthread_mutex_unlock(&fents_mu);
	fileset_free(&neu);            /* nothing of it was handed out */
refused:
	res->generation = pin_config_generation();
	snprintf(num, sizeof num, "%lu", res->generation);
	pin_log(PIN_LOG_ERROR, "configuration reload refused, the running "
		"configuration stays", "reason", res->why, "generation", num,
		"config", path, NULL);
out:
	free(was);
	free(now);
	free(changed);
	pthread_mutex_unlock(&reload_mu);
	return rc;
}

/* -------------------------------------------------------------- printing */

/* a DSN with its password replaced */
static void redact_dsn(const char *v, char *out, size_t len)
{
	const char *p;

	snprintf(out, len, "%s", v);
	if (!strncmp(v, "postgres://", 11) || !strncmp(v, "postgresql://", 13)) {
		const char *s = strstr(v, "://") + 3;
		const char *at = strchr(s, '@');
		const char *colon = strchr(s, ':');

		if (at && colon && colon < at)
			snprintf(out, len, "%.*s:<redacted>%s", (int)(colon - v), v, at);
		p = strstr(out, "password=");
		if (p) {
			size_t off = (size_t)(p - out) + 9;
			const char *end = strchr(out + off, '&');
			char tail[1024];

			snprintf(tail, sizeof tail, "%s", end ? end : "");
			snprintf(out + off, len - off, "<redacted>%s", tail);
		}
		return;
	}
	p = strstr(v, "password");
	if (p) {
		const char *q = p + 8, *end;

		while (*q == ' ')
			q++;
		if (*q != '=')
			return;
		q++;
		while (*q == ' ')
			q++;
		if (*q == '\'') {
			end = q + 1;
			while (*end && *end != '\'')
				end += end[0] == '\\' && end[1] ? 2 : 1;
			if (*end)
				end++;
		} else {
			end = q;
			while (*end && !isspace((unsigned char)*end))
				end++;
		}
		snprintf(out, len, "%.*s<redacted>%s", (int)(q - v), v, end);
	}
}

static void shown_value(const struct decl *d, char *out, size_t len)
{
	if ((d->k.flags & PIN_CFG_SECRET) && *d->val)
		snprintf(out, len, "<redacted>");
	else if (d->k.type == PIN_CFG_DSN)
		redact_dsn(d->val, out, len);
	else
		snprintf(out, len, "%s", d->val);
}

static void source_of(const struct decl *d, char *out, size_t len)
{
	bool empty = d->raw && !*d->raw;

	switch (d->src) {
	case SRC_FLAG:
		snprintf(out, len, "flag");
		break;
	case SRC_ENV:
		snprintf(out, len, "environment %s", d->env);
		break;
	case SRC_FILE:
		snprintf(out, len, "%s:%d", d->fe->path, d->fe->line);
		break;
	default:
		snprintf(out, len, "default");
		return;
	}
	if (empty)
		snprintf(out + strlen(out), len - strlen(out), " (empty: the default)");
}

static size_t *ref_order(void);

int pin_config_print(FILE *out, unsigned mode)
{
	const char *owner = NULL;
	char val[2048], src[4300], line[2200];
	size_t *ix = ref_order();

	if (!ix)
		return -1;
	/* the host's keys in table order, then each plugin's */
	for (size_t i = 0; i < ndecls; i++) {
		struct decl *d = &decls[ix[i]];

		if (mode && !(d->k.modes & mode))
			continue;
		if (d->owner != owner) {
			fprintf(out, "%s# %s%s\n", owner ? "\n" : "",
				strcmp(d->owner, "pin-host") ? "plugin " : "", d->owner);
			owner = d->owner;
		}
		resolve(d);
		shown_value(d, val, sizeof val);
		source_of(d, src, sizeof src);
		snprintf(line, sizeof line, "%s = %s", d->k.name, val);
		fprintf(out, "%-56s # %s\n", line, src);
	}
	free(ix);
	for (size_t i = 0; i < nfents; i++)
		if (!find_decl(fents[i].key) && last_fent(fents[i].key) == &fents[i])
			fprintf(out, "\n# undeclared (a plugin of ABI < 1.7 may read it)\n"
				"%s = %s  # %s:%d\n", fents[i].key, fents[i].val,
				fents[i].path, fents[i].line);
	return 0;
}

/* ------------------------------------------------------------- reference */

static const char *type_word(int t)
{
	switch (t) {
	case PIN_CFG_STRING: return "string";
	case PIN_CFG_INT: return "integer";
	case PIN_CFG_DURATION: return "duration";
	case PIN_CFG_BOOL: return "boolean";
	case PIN_CFG_ENUM: return "enum";
	case PIN_CFG_PATH: return "path";
	case PIN_CFG_URL: return "URL";
	case PIN_CFG_LIST: return "list";
	case PIN_CFG_OCTAL: return "octal mode";
	case PIN_CFG_DSN: return "libpq DSN";
	case PIN_CFG_ADDR: return "address";
	default: return "?";
	}
}

/* "duration (ms), 1..3600000" */
static void type_text(const struct pin_config_key *k, char *out, size_t len)
{
	char vals[300];
	size_t j = 0;

	snprintf(out, len, "%s", type_word(k->type));
	if (k->unit)
		snprintf(out + strlen(out), len - strlen(out), " (%s)", k->unit);
	if (bounded(k)) {
		if (k->type == PIN_CFG_OCTAL)
			snprintf(out + strlen(out), len - strlen(out), ", %#llo..%#llo",
				k->min, k->max);
		else
			snprintf(out + strlen(out), len - strlen(out), ", %lld..%lld",
				k->min, k->max);
	}
	if (k->values && k->type != PIN_CFG_ADDR) {
		for (const char *p = k->values; *p && j + 3 < sizeof vals; p++) {
			if (*p == '|') {
				vals[j++] = ',';
				vals[j++] = ' ';
			} else {
				vals[j++] = *p;
			}
		}
		vals[j] = '\0';
		snprintf(out + strlen(out), len - strlen(out), ": %s%s", vals,
			k->type == PIN_CFG_URL ? " schemes" : "");
	}
	if (k->flags & PIN_CFG_SECRET)
		snprintf(out + strlen(out), len - strlen(out), ", secret");
}

static void default_text(const struct pin_config_key *k, char *out, size_t len)
{
	if (k->flags & PIN_CFG_BUILDDEF)
		snprintf(out, len, "(set by the build; pin-host --print-config shows it)");
	else if (!k->def)
		snprintf(out, len, "(none)");
	else if (!*k->def)
		snprintf(out, len, "(empty)");
	else
		snprintf(out, len, "%s", k->def);
}

/* markdown table cell: | escaped, < > & as entities */
static void md_cell(FILE *out, const char *s, bool code)
{
	if (code)
		fputc('`', out);
	for (; *s; s++) {
		if (*s == '|')
			fputs("\\|", out);
		else if (!code && *s == '<')
			fputs("&lt;", out);
		else if (!code && *s == '>')
			fputs("&gt;", out);
		else if (!code && *s == '&')
			fputs("&amp;", out);
		else if (!code && (*s == '*' || *s == '_' || *s == '`'))
			fprintf(out, "\\%c", *s);
		else
			fputc(*s, out);
	}
	if (code)
		fputc('`', out);
}

/* mdoc text: backslash as \e; a line never starts with . or ' */
static void man_text(FILE *out, const char *s)
{
	if (*s == '.' || *s == '\'')
		fputs("\\&", out);
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\e", out);
		else
			fputc(*s, out);
	}
}

static int group_rank(const struct decl *d)
{
	const char *g = d->k.group ? d->k.group : "";

	for (size_t i = 0; i < ndecls; i++)
		if (decls[i].owner == d->owner &&
		    !strcmp(decls[i].k.group ? decls[i].k.group : "", g))
			return (int)i;
	return 0;
}

static int cmp_ref(const void *a, const void *b)
{
	const struct decl *x = &decls[*(const size_t *)a], *y = &decls[*(const size_t *)b];
	bool hx = !strcmp(x->owner, "pin-host"), hy = !strcmp(y->owner, "pin-host");
	int c;

	if (hx != hy)
		return hx ? -1 : 1;
	if (!hx && (c = strcmp(x->owner, y->owner)))
		return c;
	/* a plugin's keys by group (in the order the groups first appear),
	 * then in declaration order; the host's in table order */
	if (!hx && (c = group_rank(x) - group_rank(y)))
		return c;
	return x < y ? -1 : x > y;
}

/* indexes of decls: the host's in table order, then by plugin, group,
 * name; malloc'd */
static size_t *ref_order(void)
{
	size_t *ix;

	declare_host();
	ix = malloc((ndecls ? ndecls : 1) * sizeof *ix);
	if (!ix)
		return NULL;
	for (size_t i = 0; i < ndecls; i++)
		ix[i] = i;
	qsort(ix, ndecls, sizeof *ix, cmp_ref);
	return ix;
}

int pin_config_reference(FILE *out, const char *format)
{
	bool md = !strcmp(format, "md"), man = !strcmp(format, "man");
	bool keys = !strcmp(format, "keys");
	size_t *ix;
	const char *owner = NULL, *group = NULL;
	char t[400], def[200], m[40];

	if (!md && !man && !keys)
		return -1;
	if (!(ix = ref_order()))
		return -1;
	for (size_t i = 0; i < ndecls; i++) {
		const struct decl *d = &decls[ix[i]];
		const struct pin_config_key *k = &d->k;
		bool new_owner = d->owner != owner;
		const char *g = k->group ? k->group : "general";

		if (keys) {
			fprintf(out, "%s\n", k->name);
			continue;
		}
		type_text(k, t, sizeof t);
		default_text(k, def, sizeof def);
		mode_words(k->modes, m, sizeof m);
		if (new_owner || !group || strcmp(g, group)) {
			if (md) {
				if (new_owner)
					fprintf(out, "%s### %s%s\n", owner ? "\n" : "",
						strcmp(d->owner, "pin-host") ? "Plugin " : "",
						d->owner);
				fprintf(out, "\n#### %s\n\n", g);
				fputs("| Key | Type | Default | Modes | Reload | Description |\n"
				      "|---|---|---|---|---|---|\n", out);
			} else {
				if (owner)
					fputs(".El\n", out);
				fprintf(out, ".Ss %s%s: ", strcmp(d->owner, "pin-host") ?
					"plugin " : "", d->owner);
				man_text(out, g);
				fputs("\n.Bl -tag -width Ds\n", out);
			}
			owner = d->owner;
			group = g;
		}
		if (md) {
			fputs("| ", out);
			md_cell(out, k->name, true);
			fputs(" | ", out);
			md_cell(out, t, false);
			fputs(" | ", out);
			md_cell(out, def, !(k->flags & PIN_CFG_BUILDDEF) && k->def && *k->def);
			fprintf(out, " | %s | %s | ", m,
				(k->flags & PIN_CFG_RELOAD) ? "reload" : "restart");
			md_cell(out, k->desc, false);
			fputs(" |\n", out);
		} else {
			fprintf(out, ".It Cm %s\n", k->name);
			man_text(out, k->desc);
			fputs(".\n", out);
			fputs("Type: ", out);
			man_text(out, t);
			fputs(".\nDefault: ", out);
			man_text(out, def);
			fprintf(out, ".\nModes: %s; %s.\n", m, (k->flags & PIN_CFG_RELOAD) ?
				"reload" : "restart");
		}
	}
	if (man && owner)
		fputs(".El\n", out);
	free(ix);
	return 0;
}

/* ---------------------------------------------------------------- freeing */

void pin_config_free(void)
{
	for (size_t i = 0; i < nretired; i++)
		fileset_free(&retired[i]);
	free(retired);
	retired = NULL;
	nretired = 0;
	for (size_t i = 0; i < nfents; i++) {
		free(fents[i].key);
		free(fents[i].val);
	}
	free(fents);
	fents = NULL;
	nfents = 0;
	for (size_t i = 0; i < nfiles; i++)
		free(files[i]);
	free(files);
	files = NULL;
	nfiles = 0;
	for (size_t i = 0; i < nflags; i++) {
		free(flags[i].key);
		free(flags[i].val);
	}
	free(flags);
	flags = NULL;
	nflags = 0;
	for (size_t i = 0; i < ndecls; i++)
		if (decls[i].copied) {
			free((char *)decls[i].k.name);
			free((char *)decls[i].k.def);
			free((char *)decls[i].k.values);
			free((char *)decls[i].k.unit);
			free((char *)decls[i].k.group);
			free((char *)decls[i].k.desc);
		}
	free(decls);
	decls = NULL;
	ndecls = cdecls = 0;
	free(order);
	order = NULL;
	for (size_t i = 0; i < nowners; i++)
		free(owners[i]);
	free(owners);
	owners = NULL;
	nowners = 0;
	for (size_t i = 0; i < noldplug; i++)
		free(oldplug[i]);
	free(oldplug);
	oldplug = NULL;
	noldplug = 0;
	pthread_mutex_lock(&warn_mu);
	for (size_t i = 0; i < nwarned; i++)
		free(warned[i]);
	free(warned);
	warned = NULL;
	nwarned = 0;
	pthread_mutex_unlock(&warn_mu);
	host_declared = false;
	invalidate();
}

int pin_config_socket_perms(const char *path)
{
	long long mode = pin_config_int("socket_mode");
	const char *gs = pin_config_str("socket_group");
	int rc = -1;

	if (mode < 0 || mode > 0777) {
		pin_log(PIN_LOG_ERROR, "socket_mode is not an octal mode like 0660", NULL);
		goto out;
	}
	if (*gs) {
		struct group gr, *res = NULL;
		char buf[4096];

		if (getgrnam_r(gs, &gr, buf, sizeof buf, &res) != 0 || !res) {
			pin_log(PIN_LOG_ERROR, "socket_group: no such group",
				"group", gs, NULL);
			goto out;
		}
		/* A socket in a setgid directory of that group (the packages'
		 * /run/pin-calendar) has it already: no chown, which the units'
		 * SystemCallFilter (~@privileged, @chown in it) refuses. */
		struct stat st;

		if ((stat(path, &st) != 0 || st.st_gid != res->gr_gid) &&
		    chown(path, (uid_t)-1, res->gr_gid) < 0) {
			pin_log(PIN_LOG_ERROR, "socket_group: cannot chown the socket "
				"(the service user must be a member of the group)",
				"group", gs, "error", strerror(errno), NULL);
			goto out;
		}
	}
	if (chmod(path, (mode_t)mode) < 0) {
		pin_log(PIN_LOG_ERROR, "cannot chmod the socket", "path", path,
			"error", strerror(errno), NULL);
		goto out;
	}
	rc = 0;
out:
	return rc;
}

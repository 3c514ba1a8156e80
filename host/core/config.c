/* config.c -- key = value file, PIN_<KEY> environment, command-line flags.
 * Precedence: flag (pin_config_set) > environment > file > default.
 * "include = FILE" reads FILE at that line (instance files include the
 * common pin-host.conf).
 * Loaded on the main thread before any other thread starts; read-only after. */
#include "config.h"
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core.h"

struct kv {
	char *key;
	char *file_val;
	char *flag_val;
	char *env_name;
};

static struct kv *kvs;
static size_t nkvs;

static struct kv *find(const char *key, int create)
{
	for (size_t i = 0; i < nkvs; i++)
		if (strcmp(kvs[i].key, key) == 0)
			return &kvs[i];
	if (!create)
		return NULL;
	struct kv *n = realloc(kvs, (nkvs + 1) * sizeof *kvs);
	if (!n)
		return NULL;
	kvs = n;
	memset(&kvs[nkvs], 0, sizeof *kvs);
	kvs[nkvs].key = strdup(key);
	return &kvs[nkvs++];
}

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

static int load_file(const char *path, int depth);

/* "include = FILE": loads FILE where the line stands (later lines win);
 * a relative FILE is relative to the including file's directory. */
static int load_include(const char *path, const char *inc, int depth)
{
	char full[4096];
	const char *slash = strrchr(path, '/');

	if (depth >= 4) {
		pin_log(PIN_LOG_ERROR, "config include nested too deep", "path", path, NULL);
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
	return load_file(path, 0);
}

static int load_file(const char *path, int depth)
{
	FILE *f = fopen(path, "r");
	char line[4096], lno[16];
	int n = 0, rc = 0;

	if (!f) {
		pin_log(PIN_LOG_ERROR, "cannot open config file", "path", path,
			"error", strerror(errno), NULL);
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		char *s = trim(line), *eq, *k, *v;
		struct kv *e;

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
			if (load_include(path, v, depth) < 0) {
				rc = -1;
				break;
			}
			continue;
		}
		e = find(k, 1);
		if (!e) {
			rc = -1;
			break;
		}
		free(e->file_val);
		e->file_val = strdup(v);
	}
	fclose(f);
	return rc;
}

int pin_config_set(const char *key, const char *value)
{
	struct kv *e = find(key, 1);

	if (!e)
		return -1;
	free(e->flag_val);
	e->flag_val = value ? strdup(value) : NULL;
	return 0;
}

static const char *env_for(struct kv *e, const char *key)
{
	char name[256];
	size_t i = 0;

	if (e && e->env_name)
		return getenv(e->env_name);
	memcpy(name, "PIN_", 4);
	for (i = 0; key[i] && i + 5 < sizeof name; i++) {
		char c = key[i];
		name[4 + i] = (c == '.' || c == '-') ? '_' : (char)toupper((unsigned char)c);
	}
	name[4 + i] = '\0';
	return getenv(name);
}

const char *pin_config_get(const char *key, const char *def)
{
	struct kv *e = find(key, 0);
	const char *v;

	if (e && e->flag_val)
		return e->flag_val;
	v = env_for(e, key);
	if (v)
		return v;
	if (e && e->file_val)
		return e->file_val;
	return def;
}

long long pin_config_int(const char *key, long long def)
{
	const char *v = pin_config_get(key, NULL);
	char *end;
	long long n;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtoll(v, &end, 10);
	bool digits = end != v;
	/* trailing blanks are fine; v is shared (and maybe the environment):
	 * look, do not trim in place */
	while (isspace((unsigned char)*end))
		end++;
	if (errno || !digits || *end != '\0') {
		pin_log(PIN_LOG_WARN, "config value is not an integer, using default",
			"key", key, NULL);
		return def;
	}
	return n;
}

bool pin_config_bool(const char *key, bool def)
{
	const char *v = pin_config_get(key, NULL);

	if (!v || !*v)
		return def;
	if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on") ||
	    !strcmp(v, "1"))
		return true;
	if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off") ||
	    !strcmp(v, "0"))
		return false;
	pin_log(PIN_LOG_WARN, "config value is not a boolean, using default",
		"key", key, NULL);
	return def;
}

void pin_config_free(void)
{
	for (size_t i = 0; i < nkvs; i++) {
		free(kvs[i].key);
		free(kvs[i].file_val);
		free(kvs[i].flag_val);
		free(kvs[i].env_name);
	}
	free(kvs);
	kvs = NULL;
	nkvs = 0;
}

int pin_config_socket_perms(const char *path)
{
	const char *ms = pin_config_get("socket_mode", "0660");
	const char *gs = pin_config_get("socket_group", "");
	char *end;
	long mode;
	int rc = -1;

	errno = 0;
	mode = strtol(ms, &end, 8);
	if (errno || end == ms || *end || mode < 0 || mode > 0777) {
		pin_log(PIN_LOG_ERROR, "socket_mode is not an octal mode like 0660",
			"value", ms, NULL);
		goto out;
	}
	if (gs && *gs) {
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

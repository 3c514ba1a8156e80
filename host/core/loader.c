/* loader.c -- dlopen plugins, check the ABI, call init; read the
 * configuration keys plugins declare in their descriptors (1.7). */
#include "config.h"
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core.h"

struct loaded {
	void *handle;
	const struct pin_plugin *desc;
};

static struct loaded *plugins;
static size_t nplugins;

typedef const struct pin_plugin *(*desc_fn)(void);

/* Declares d's configuration keys (once per plugin name); a plugin of ABI
 * < 1.7 declares none and makes unknown keys warnings.  0, -1 with err. */
static int declare_keys(const struct pin_plugin *d, char *err, size_t errlen)
{
	char e[400] = "";

	if (pin_config_owner_declared(d->name))
		return 0;
	if (d->abi_minor < 7 ||
	    d->size < offsetof(struct pin_plugin, config_key_size) + sizeof(d->config_key_size)) {
		pin_config_note_undeclaring(d->name);
		return 0;
	}
	if (pin_config_declare(d->name, d->config_keys, d->config_key_size, e, sizeof e) < 0) {
		snprintf(err, errlen, "plugin %s: %s", d->name, e);
		return -1;
	}
	return 0;
}

/* The descriptor of the plugin at path, declared, without init.  0; 1 not
 * a plugin of this host (skipped); -1 with err. */
static int declare_file(const char *path, char *err, size_t errlen)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	desc_fn fn;
	const struct pin_plugin *d;
	int rc = 1;

	if (!h) {
		snprintf(err, errlen, "cannot load plugin %s: %s", path, dlerror());
		return -1;
	}
	*(void **)&fn = dlsym(h, "pin_plugin_desc");
	d = fn ? fn() : NULL;
	if (d && d->abi_major == PIN_ABI_MAJOR && d->abi_minor <= PIN_ABI_MINOR && d->name &&
	    d->size >= offsetof(struct pin_plugin, fini) + sizeof(d->fini))
		rc = declare_keys(d, err, errlen);
	if (!getenv("PIN_NO_DLCLOSE"))
		dlclose(h);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int pin_plugins_declare(const char *list, const char *dir)
{
	char err[600], path[4096], *copy, *save = NULL, *tok;
	char **names = NULL;
	size_t n = 0;
	DIR *dd = opendir(dir && *dir ? dir : PIN_PLUGIN_DIR);
	struct dirent *de;
	int rc = 0;

	if (!dir || !*dir)
		dir = PIN_PLUGIN_DIR;
	/* every NAME.so of plugin_dir, in name order (the first declaration
	 * of a key wins) */
	while (dd && (de = readdir(dd))) {
		size_t l = strlen(de->d_name);
		char **nn;

		if (l < 4 || strcmp(de->d_name + l - 3, ".so") || de->d_name[0] == '.')
			continue;
		nn = realloc(names, (n + 1) * sizeof *nn);
		if (!nn)
			break;
		names = nn;
		names[n++] = strdup(de->d_name);
	}
	if (dd)
		closedir(dd);
	qsort(names, n, sizeof *names, cmp_str);
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		if (declare_file(path, err, sizeof err) < 0) {
			pin_log(PIN_LOG_WARN, "plugin_dir: cannot read a plugin's "
				"configuration keys", "error", err, NULL);
			rc = -1;
		}
		free(names[i]);
	}
	free(names);
	/* plugins named by path outside plugin_dir */
	copy = list ? strdup(list) : NULL;
	for (tok = copy ? strtok_r(copy, ", ", &save) : NULL; tok;
			tok = strtok_r(NULL, ", ", &save)) {
		size_t l = strlen(tok);

		if (!strchr(tok, '/') && !(l > 3 && !strcmp(tok + l - 3, ".so")))
			continue;
		if (declare_file(tok, err, sizeof err) < 0) {
			pin_log(PIN_LOG_WARN, "cannot read a plugin's configuration keys",
				"error", err, NULL);
			rc = -1;
		}
	}
	free(copy);
	return rc;
}

int pin_plugin_load_file(const char *path, char *err, size_t errlen)
{
	void *h;
	desc_fn fn;
	const struct pin_plugin *d;
	struct pin_registrar *reg = NULL;
	struct loaded *n;
	char ierr[256] = "";
	size_t before_routes = pin_reg.nroutes;

	(void)before_routes;
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "cannot load plugin %s: %s", path, dlerror());
		return -1;
	}
	*(void **)&fn = dlsym(h, "pin_plugin_desc");
	if (!fn) {
		snprintf(err, errlen, "plugin %s has no pin_plugin_desc symbol", path);
		goto fail;
	}
	d = fn();
	if (!d) {
		snprintf(err, errlen, "plugin %s: pin_plugin_desc returned NULL", path);
		goto fail;
	}
	if (d->abi_major != PIN_ABI_MAJOR) {
		snprintf(err, errlen, "plugin %s: incompatible abi_major %d (host has %d.%d)",
			path, d->abi_major, PIN_ABI_MAJOR, PIN_ABI_MINOR);
		goto fail;
	}
	if (d->abi_minor > PIN_ABI_MINOR) {
		snprintf(err, errlen, "plugin %s: abi_minor %d is newer than the host's "
			"(host has %d.%d)", path, d->abi_minor, PIN_ABI_MAJOR, PIN_ABI_MINOR);
		goto fail;
	}
	if (d->size < offsetof(struct pin_plugin, fini) + sizeof(d->fini) ||
	    !d->name || !d->init) {
		snprintf(err, errlen, "plugin %s: descriptor size %zu too small or "
			"name/init missing", path, d->size);
		goto fail;
	}
	for (size_t i = 0; i < nplugins; i++)
		if (!strcmp(plugins[i].desc->name, d->name)) {
			snprintf(err, errlen, "plugin %s: a plugin named %s is already loaded",
				path, d->name);
			goto fail;
		}
	if (declare_keys(d, err, errlen) < 0)
		goto fail;
	reg = pin_registrar_new(d->name);
	if (!reg) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	pin_registrar_set_minor(reg, d->abi_minor);
	if (d->init(&pin_api, reg, ierr, sizeof ierr) != 0) {
		snprintf(err, errlen, "plugin %s (%s) init failed: %s", d->name, path,
			ierr[0] ? ierr : "no reason given");
		pin_registrar_free(reg);
		/* its registrations point into the .so: keep it mapped until
		 * pin_plugins_unload() frees the registry */
		n = realloc(plugins, (nplugins + 1) * sizeof *n);
		if (n) {
			plugins = n;
			plugins[nplugins++] = (struct loaded){ h, NULL };
		}
		return -1;
	}
	pin_registrar_free(reg);
	n = realloc(plugins, (nplugins + 1) * sizeof *n);
	if (!n) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	plugins = n;
	plugins[nplugins++] = (struct loaded){ h, d };
	pin_log(PIN_LOG_INFO, "plugin loaded", "plugin", d->name, "version",
		d->version ? d->version : "", "path", path, NULL);
	return 0;
fail:
	dlclose(h);
	return -1;
}

int pin_plugins_load(const char *list, const char *dir)
{
	char *copy, *save = NULL, *tok, err[512], path[4096];
	int rc = 0;

	if (!list || !*list)
		return 0;
	copy = strdup(list);
	if (!copy)
		return -1;
	for (tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		size_t l = strlen(tok);
		if (strchr(tok, '/') || (l > 3 && !strcmp(tok + l - 3, ".so")))
			snprintf(path, sizeof path, "%s", tok);
		else
			snprintf(path, sizeof path, "%s/%s.so", dir ? dir : PIN_PLUGIN_DIR, tok);
		if (pin_plugin_load_file(path, err, sizeof err) < 0) {
			pin_log(PIN_LOG_ERROR, "plugin refused", "error", err, NULL);
			pin_plugins_unload();
			rc = -1;
			break;
		}
	}
	free(copy);
	return rc;
}

void pin_plugins_unload(void)
{
	for (size_t i = nplugins; i-- > 0;)
		if (plugins[i].desc && plugins[i].desc->fini)
			plugins[i].desc->fini();
	pin_registry_free();
	/* PIN_NO_DLCLOSE (set by ./dev test for ASan hosts): keep the code
	 * mapped so LeakSanitizer can name plugin frames at exit */
	for (size_t i = nplugins; i-- > 0;)
		if (!getenv("PIN_NO_DLCLOSE"))
			dlclose(plugins[i].handle);
	free(plugins);
	plugins = NULL;
	nplugins = 0;
}

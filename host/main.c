/* main.c -- pin-host: flags, config, signals, mode dispatch. */
#include "config.h"
#include <malloc.h>
#include <errno.h>
#include <dlfcn.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "core.h"
#include "api.h"
#include "worker.h"

static pthread_t sig_tid;
static int sig_started;
static const char *reload_path;         /* the file a reload re-reads */
static unsigned reload_mode;            /* PIN_CFG_API / PIN_CFG_WORKER */

static void reload(void);

static void *sig_thread(void *arg)
{
	sigset_t *set = arg;
	int sig = 0;
	char num[16];

	for (;;) {
		while (sigwait(set, &sig) != 0)
			;
		if (sig == SIGUSR2) {
			if (!pin_stopping && reload_mode == PIN_CFG_API)
				pin_api_handover();
			continue;
		}
		if (sig != SIGHUP)
			break;
		if (!pin_stopping)
			reload();
	}
	snprintf(num, sizeof num, "%d", sig);
	if (!pin_stopping)
		pin_log(PIN_LOG_INFO, "signal received, stopping", "signal", num, NULL);
	pin_request_stop();
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;   /* only interrupts blocking reads */
}

static sigset_t sigs;

static int start_signals(void)
{
	struct sigaction sa = { 0 };

	signal(SIGPIPE, SIG_IGN);
	sa.sa_handler = on_usr1;   /* no SA_RESTART: reads return EINTR */
	sigaction(SIGUSR1, &sa, NULL);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if (pthread_create(&sig_tid, NULL, sig_thread, &sigs) != 0)
		return -1;
	sig_started = 1;
	return 0;
}

static void stop_signals(void)
{
	if (!sig_started)
		return;
	if (!pin_stopping) {
		/* stopping without a signal (a start-up failure): the flag first,
		 * so the wake-up below is not logged as an operator's signal */
		pin_request_stop();
		pthread_kill(sig_tid, SIGTERM);
	}
	pthread_join(sig_tid, NULL);
	sig_started = 0;
}

static void usage(FILE *f)
{
	fputs("usage: pin-host --mode api|worker [options]\n"
	      "       pin-host --migrate [--sql-dir DIR] [--pg-dsn DSN]\n"
	      "       pin-host --config WORKER.conf --dlq list [GROUP]\n"
	      "       pin-host --config WORKER.conf --dlq show|replay|ack GROUP ID...|all\n"
	      "                [--reason TEXT]\n"
	      "options (each also a config key and a PIN_<KEY> variable):\n"
	      "  --config FILE          config file (default " PIN_SYSCONF_DIR "/pin-host.conf)\n"
	      "  --plugins LIST         comma list of plugin names or .so paths\n"
	      "  --plugin-dir DIR       where NAME.so lives (default " PIN_PLUGIN_DIR ")\n"
	      "  --listen ADDR          api: unix:/path.sock or host:port\n"
	      "  --api-server S         api: loop (event loop + workers, default) or\n"
	      "                         threads (libfcgi, a thread per nginx connection)\n"
	      "  --threads N            api: request workers (loop; default db_concurrency)\n"
	      "                         or FastCGI threads (threads; default 2 x cores)\n"
	      "  --pg-dsn DSN           PostgreSQL connection string\n"
	      "  --pg-dsn-read DSN      api: a hot standby for reads that tolerate\n"
	      "                         staleness (public showcase); optional\n"
	      "  --kafka-bootstrap B    host:port list, or @FILE to read it from FILE\n"
	      "  --once                 worker: run every job once (and the relay), exit\n"
	      "  --clock-offset-s N     shift the host clock (needs allow_clock_offset)\n"
	      "  --sql-dir DIR          migrations (default " PIN_SQL_DIR ")\n"
	      "  --pid-file FILE        write the pid\n"
	      "  --log-level L          debug|info|warn|error\n"
	      "  --list-routes          load --plugins, print METHOD PATH and who may call it\n"
	      "                         (actors, permission, tenant) per route, exit\n"
	      "  --check-plugin FILE.so load one plugin, print what it registers, exit\n"
	      "  --check-config         check the configuration (file, environment,\n"
	      "                         flags) against the declared keys, exit 0 or 1;\n"
	      "                         --mode api|worker|migrate picks the host's keys\n"
	      "  --print-config         print every key's effective value and where it\n"
	      "                         comes from (secrets redacted), exit\n"
	      "  --print-config-reference md|man|keys\n"
	      "                         the reference of every declared key (the host's\n"
	      "                         and those of the plugins in plugin_dir), exit\n"
	      "  --dlq list|show|replay|ack\n"
	      "                         the dead letters of the worker's consumer groups:\n"
	      "                         list the pending ones, show one (payload too),\n"
	      "                         replay to the original topic, or ack (--reason);\n"
	      "                         exit\n"
	      "  --version              version, plugin ABI and build flags\n"
	      "keys, files and environment: pin-host.conf(5)\n", f);
}

static void version(void)
{
	printf("pin-host %s\n"
	       "plugin ABI %d.%d\n"
	       "plugin dir %s\n"
	       "compiler %s\n"
	       "build flags %s\n",
	       PACKAGE_VERSION, PIN_ABI_MAJOR, PIN_ABI_MINOR, PIN_PLUGIN_DIR,
	       __VERSION__, PIN_BUILD_CFLAGS);
}

/* --check-plugin FILE: loads FILE like the host would (ABI check, init with
 * the host API, no database, no socket, no thread) and prints what it
 * registers.  0 accepted; 1 refused (reason on stderr). */
static int check_plugin(const char *path)
{
	char err[512] = "";
	const struct pin_plugin *(*fn)(void) = NULL;
	const struct pin_plugin *d = NULL;
	char rel[4096];
	void *h;
	int rc = 1;

	if (!strchr(path, '/')) {   /* dlopen would search the library path */
		snprintf(rel, sizeof rel, "./%s", path);
		path = rel;
	}
	if (pin_plugin_load_file(path, err, sizeof err) < 0) {
		fprintf(stderr, "refused: %s\n", err);
		goto out;
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);   /* same handle, one more ref */
	if (h) {
		*(void **)&fn = dlsym(h, "pin_plugin_desc");
		d = fn ? fn() : NULL;
	}
	printf("file      %s\n", path);
	if (d) {
		printf("name      %s\n", d->name);
		printf("version   %s\n", d->version ? d->version : "");
		printf("abi       %d.%d (host %d.%d)\n", d->abi_major, d->abi_minor,
		       PIN_ABI_MAJOR, PIN_ABI_MINOR);
	}
	/* 1.7: the configuration keys it declares */
	if (d && d->abi_minor >= 7 && d->config_keys &&
	    d->size >= offsetof(struct pin_plugin, config_key_size) + sizeof(d->config_key_size))
		for (const char *p = (const char *)d->config_keys;; p += d->config_key_size) {
			const struct pin_config_key *k = (const void *)p;

			if (!k->name)
				break;
			printf("config    %s = %s\n", k->name, k->def ? k->def : "");
		}
	for (size_t i = 0; i < pin_reg.nroutes; i++)
		printf("route     %s %s\n", pin_reg.routes[i].r.method,
		       pin_reg.routes[i].r.pattern);
	for (size_t i = 0; i < pin_reg.njobs; i++)
		printf("job       %s every %d ms\n", pin_reg.jobs[i].j.name,
		       pin_reg.jobs[i].j.interval_ms);
	for (size_t i = 0; i < pin_reg.nconsumers; i++) {
		printf("consumer  %s:", pin_reg.consumers[i].c.group);
		for (char **t = pin_reg.consumers[i].topics; t && *t; t++)
			printf(" %s", *t);
		printf("\n");
	}
	printf("result    accepted\n");
	if (h)
		dlclose(h);
	rc = 0;
out:
	pin_plugins_unload();
	return rc;
}

static int level_of(const char *s)
{
	if (!s)
		return PIN_LOG_INFO;
	if (!strcmp(s, "debug"))
		return PIN_LOG_DEBUG;
	if (!strcmp(s, "warn"))
		return PIN_LOG_WARN;
	if (!strcmp(s, "error"))
		return PIN_LOG_ERROR;
	return PIN_LOG_INFO;
}

/* the reloaded values put to work where they are not read at each use */
static int reload_apply(void)
{
	if (reload_mode == PIN_CFG_API && pin_auth_init() < 0)
		return -1;
	pin_log_set_level(level_of(pin_config_str("log_level")));
	return 0;
}

/*
 * SIGHUP (systemctl reload): the configuration file again, as nginx -s
 * reload does: a bad file is refused and the running configuration stays;
 * keys that need a restart are named and keep their values.  Requests and
 * messages in flight are not touched: each reads a key when it uses it.
 */
static void reload(void)
{
	struct pin_config_reload_result res;
	int rc;

	if (!reload_path) {
		pin_log(PIN_LOG_WARN, "SIGHUP: no configuration file to reload (the host "
			"was started from flags and environment only)", NULL);
		pin_metric_add("pin_config_reloads_total", "result=\"refused\"", 1);
		return;
	}
	rc = pin_config_reload(reload_path, reload_mode, reload_apply, &res);
	pin_metric_add("pin_config_reloads_total",
		rc == 0 ? "result=\"ok\"" : "result=\"refused\"", 1);
	pin_metric_set("pin_config_generation", NULL, (double)res.generation);
	pin_metric_set("pin_config_keys_needing_restart", NULL, (double)res.restart_only);
}

/* --list-routes: "METHOD PATH" then, tab-separated, who may call it (the
 * contract check compares them with x-actors, x-permission and
 * x-requires-tenant of api/openapi.yaml) */
static void print_route(const struct pin_route *r)
{
	static const char *const names[] = { "agent", "consultant", "agency_head",
		"pin_manager", "investor" };
	char actors[80] = "";

	for (size_t b = 0; b < sizeof names / sizeof names[0]; b++)
		if (r->actors & pin_actor_bit(names[b]))
			snprintf(actors + strlen(actors), sizeof actors - strlen(actors), "%s%s",
				actors[0] ? "," : "", names[b]);
	printf("%s %s\tactors=%s\tpermission=%s\ttenant=%s\n", r->method, r->pattern,
		actors[0] ? actors : "public", r->permission ? r->permission : "-",
		r->require_tenant ? "yes" : "no");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "config", required_argument, NULL, 'c' },
		{ "plugins", required_argument, NULL, 'p' },
		{ "plugin-dir", required_argument, NULL, 'P' },
		{ "listen", required_argument, NULL, 'l' },
		{ "threads", required_argument, NULL, 't' },
		{ "api-server", required_argument, NULL, 'S' },
		{ "pg-dsn", required_argument, NULL, 'd' },
		{ "pg-dsn-read", required_argument, NULL, 'R' },
		{ "kafka-bootstrap", required_argument, NULL, 'k' },
		{ "once", no_argument, NULL, 'o' },
		{ "clock-offset-s", required_argument, NULL, 'C' },
		{ "migrate", no_argument, NULL, 'M' },
		{ "sql-dir", required_argument, NULL, 's' },
		{ "pid-file", required_argument, NULL, 'f' },
		{ "log-level", required_argument, NULL, 'L' },
		{ "list-routes", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "check-plugin", required_argument, NULL, 'K' },
		{ "check-config", no_argument, NULL, 'T' },
		{ "print-config", no_argument, NULL, 'D' },
		{ "print-config-reference", required_argument, NULL, 'G' },
		{ "dlq", required_argument, NULL, 'Q' },
		{ "reason", required_argument, NULL, 'W' },
		{ NULL, 0, NULL, 0 }
	};
	const char *config = NULL, *check = NULL, *reference = NULL;
	const char *dlq = NULL, *reason = NULL;
	bool once = false, migrate = false, list_routes = false;
	bool check_config = false, print_config = false, mode_migrate = false;
	unsigned cmode = 0;
	int c, rc = 1;
	struct pin_arena *arena = NULL;

	/* Freed memory stays in the process: glibc gave the top of a thread's
	 * heap back (madvise DONTNEED) whenever it exceeded 128 KiB free, and
	 * the next request faulted the pages in again; with 64 threads each
	 * madvise is a TLB shootdown on every core.  Measured under the event
	 * list (doc/performance.md "Memory kept in the process"): madvise + page faults were a
	 * third of the API host's CPU.  Allocations below 4 MiB (result sets,
	 * pages of JSON, arena chunks) come from the heaps, not mmap/munmap. */
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	pin_metrics_init();
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			/* --mode migrate: --check-config/--print-config of migrate.conf */
			if (!strcmp(optarg, "migrate"))
				mode_migrate = true;
			else
				pin_config_set("mode", optarg);
			break;
		case 'c': config = optarg; break;
		case 'p': pin_config_set("plugins", optarg); break;
		case 'P': pin_config_set("plugin_dir", optarg); break;
		case 'l': pin_config_set("listen", optarg); break;
		case 't': pin_config_set("threads", optarg); break;
		case 'S': pin_config_set("api_server", optarg); break;
		case 'd': pin_config_set("pg_dsn", optarg); break;
		case 'R': pin_config_set("pg_dsn_read", optarg); break;
		case 'k': pin_config_set("kafka_bootstrap", optarg); break;
		case 'o': once = true; break;
		case 'C': pin_config_set("clock_offset_s", optarg); break;
		case 'M': migrate = true; break;
		case 's': pin_config_set("sql_dir", optarg); break;
		case 'f': pin_config_set("pid_file", optarg); break;
		case 'L': pin_config_set("log_level", optarg); break;
		case 'r': list_routes = true; break;
		case 'h': usage(stdout); pin_config_free(); return 0;
		case 'V': version(); pin_config_free(); return 0;
		case 'K': check = optarg; break;
		case 'T': check_config = true; break;
		case 'D': print_config = true; break;
		case 'G': reference = optarg; break;
		case 'Q': dlq = optarg; break;
		case 'W': reason = optarg; break;
		default: usage(stderr); pin_config_free(); return 2;
		}
	}
	if (mode_migrate && !check_config && !print_config) {
		fprintf(stderr, "pin-host: --mode migrate is for --check-config and "
			"--print-config; migrations run with --migrate\n");
		pin_config_free();
		return 2;
	}
	migrate = migrate || mode_migrate;
	if (optind < argc && !dlq) {
		usage(stderr);
		pin_config_free();
		return 2;
	}
	if (reference) {   /* the table, not this machine's configuration */
		pin_plugins_declare("", pin_config_str("plugin_dir"));
		rc = pin_config_reference(stdout, reference) == 0 ? 0 : 2;
		if (rc)
			fprintf(stderr, "pin-host: --print-config-reference md, man or keys\n");
		goto out_cfg;
	}
	/* --config, then PIN_CONFIG, then the default file if it is readable */
	if (!config && getenv("PIN_CONFIG") && *getenv("PIN_CONFIG"))
		config = getenv("PIN_CONFIG");
	if (!config && access(PIN_SYSCONF_DIR "/pin-host.conf", R_OK) == 0)
		config = PIN_SYSCONF_DIR "/pin-host.conf";
	if (config && pin_config_load(config) < 0) {
		if (check_config)
			fprintf(stderr, "pin-host: configuration file %s test failed\n", config);
		goto out_cfg;
	}
	/* the keys of every plugin in plugin_dir (and of the .so paths in
	 * plugins), read from their descriptors: a shared file may set the
	 * keys of plugins this host does not load */
	pin_plugins_declare(pin_config_str("plugins"), pin_config_str("plugin_dir"));
	if (migrate)
		cmode = PIN_CFG_MIGRATE;
	else if (!strcmp(pin_config_str("mode"), "api"))
		cmode = PIN_CFG_API;
	else if (!strcmp(pin_config_str("mode"), "worker"))
		cmode = PIN_CFG_WORKER;
	if (check_config || print_config) {
		int errors = pin_config_check(cmode, stderr);
		const char *name = config ? config : "(none: defaults, environment, flags)";

		if (errors) {
			fprintf(stderr, "pin-host: configuration file %s test failed\n", name);
			rc = 1;
		} else if (print_config) {
			printf("# pin-host %s, configuration %s, mode %s\n", PACKAGE_VERSION,
				name, migrate ? "migrate" : *pin_config_str("mode") ?
				pin_config_str("mode") : "(any)");
			pin_config_print(stdout, cmode);
			rc = 0;
		} else {
			fprintf(stderr, "pin-host: the configuration file %s syntax is ok\n"
				"pin-host: configuration file %s test is successful\n", name, name);
			rc = 0;
		}
		goto out_cfg;
	}
	if (pin_config_check(cmode, NULL) > 0) {
		pin_log(PIN_LOG_ERROR, "configuration refused, not starting (pin-host "
			"--check-config explains)", "config", config ? config : "", NULL);
		goto out_cfg;
	}
	pin_log_set_level(level_of(pin_config_str("log_level")));
	if (pin_config_int("clock_offset_s") != 0) {
		char offset[24];

		if (!pin_config_bool("allow_clock_offset")) {
			pin_log(PIN_LOG_ERROR, "clock offset refused: allow_clock_offset is "
				"not true in the config", NULL);
			goto out_cfg;
		}
		snprintf(offset, sizeof offset, "%lld", pin_config_int("clock_offset_s"));
		pin_clock_set_offset_s(pin_config_int("clock_offset_s"));
		pin_log(PIN_LOG_WARN, "host clock shifted", "offset_s", offset, NULL);
	}
	pin_db_set_dsn(pin_config_str("pg_dsn"));
	pin_db_set_read_dsn(pin_config_str("pg_dsn_read"),
		(double)pin_config_int("read_max_lag_s"));
	arena = pin_arena_new();
	pin_arena_set_current(arena);

	if (check) {
		rc = check_plugin(check);
		goto out_db;
	}
	if (migrate) {
		rc = pin_migrate(pin_config_str("sql_dir")) == 0 ? 0 : 1;
		goto out_db;
	}
	if (dlq) {   /* the operator's tool (dlq_tool.c); nothing started */
		/* its output is the answer: the plugins' INFO lines stay out */
		if (level_of(pin_config_str("log_level")) < PIN_LOG_WARN)
			pin_log_set_level(PIN_LOG_WARN);
		rc = pin_dlq_main(dlq, argc - optind, argv + optind, reason);
		pin_plugins_unload();
		goto out_db;
	}

	if (list_routes) {   /* the routes the plugins register; nothing started */
		rc = pin_plugins_load(pin_config_str("plugins"),
			pin_config_str("plugin_dir")) == 0 ? 0 : 1;
		for (size_t i = 0; rc == 0 && i < pin_reg.nroutes; i++)
			print_route(&pin_reg.routes[i].r);
		pin_plugins_unload();
		goto out_db;
	}

	const char *mode = pin_config_str("mode");
	if (strcmp(mode, "api") && strcmp(mode, "worker")) {
		pin_log(PIN_LOG_ERROR, "--mode api|worker is required", NULL);
		usage(stderr);
		rc = 2;
		goto out_db;
	}
	if (once && strcmp(mode, "worker") != 0) {
		pin_log(PIN_LOG_ERROR, "--once is for --mode worker", NULL);
		rc = 2;
		goto out_db;
	}
	const char *pidf = pin_config_str("pid_file");
	if (*pidf) {
		FILE *f = fopen(pidf, "w");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
	}
	reload_path = config;
	pin_api_set_exec(argv);
	reload_mode = !strcmp(mode, "api") ? PIN_CFG_API : PIN_CFG_WORKER;
	pin_metric_set("pin_config_generation", NULL, (double)pin_config_generation());
	pin_metric_add("pin_config_reloads_total", "result=\"ok\"", 0);
	pin_metric_add("pin_config_reloads_total", "result=\"refused\"", 0);
	pin_metric_set("pin_config_keys_needing_restart", NULL, 0);
	if (start_signals() < 0)
		goto out_db;
	if (pin_auth_init() < 0)
		goto out_sig;
	if (pin_plugins_load(pin_config_str("plugins"),
			pin_config_str("plugin_dir")) < 0) {
		pin_log(PIN_LOG_ERROR, "stopping: a plugin could not be loaded", NULL);
		goto out_plugins;
	}
	if (!strcmp(mode, "api")) {
		/* 0: the server's default (fcgi.c) */
		rc = pin_api_run(pin_config_str("listen"),
			(int)pin_config_int("threads")) == 0 ? 0 : 1;
	} else if (once) {
		int a = pin_jobs_run_once();
		int b = pin_relay_run_once();
		rc = (a < 0 || b < 0) ? 1 : 0;
	} else {
		if (pin_metrics_listen_start(pin_config_str("metrics_listen")) < 0 ||
		    pin_relay_start() < 0 || pin_jobs_start() < 0 ||
		    pin_consumers_start() < 0) {
			pin_log(PIN_LOG_ERROR, "worker host failed to start", NULL);
			pin_request_stop();
			rc = 1;
		} else {
			pin_log(PIN_LOG_INFO, "worker host running", NULL);
			pin_wait_stop();
			rc = 0;
		}
		pin_consumers_stop();
		pin_jobs_stop();
		pin_relay_stop();
		pin_metrics_listen_stop();
		pin_log(PIN_LOG_INFO, "worker host stopped", NULL);
	}
out_plugins:
	pin_plugins_unload();
	pin_auth_fini();
out_sig:
	stop_signals();
	if (*pidf) {
		/* after a handover the file names the successor: leave it */
		FILE *f = fopen(pidf, "r");
		long inpid = 0;

		if (f) {
			if (fscanf(f, "%ld", &inpid) != 1)
				inpid = 0;
			fclose(f);
		}
		if (inpid == (long)getpid())
			unlink(pidf);
	}
out_db:
	pin_arena_free(arena);
	pin_db_close_thread();
	pin_db_set_dsn(NULL);
	pin_db_set_read_dsn(NULL, 0);
out_cfg:
	pin_metrics_free();
	pin_config_free();
	return rc;
}

/* core.h -- the host's core: configuration, log, clock, ids, memory,
 * database, metrics, outbox, trace, the registry and loader of plugins, the
 * route table, JSON and UTF-8 helpers, migrations, the process lifecycle.
 * Not part of the plugin ABI.  Neither the API side (host/api/) nor the
 * worker side (host/worker/) is visible from here: the core depends on
 * nothing above it (the include path of the core's objects holds only
 * host/include and host/core). */
#ifndef PIN_CORE_H
#define PIN_CORE_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <libpq-fe.h>
#include <json-c/json.h>
#include "pin/plugin.h"

/* ---- log.c: JSON lines on stderr ---------------------------------------- */
void pin_log(int level, const char *msg, ...);      /* k, v, ..., NULL */
void pin_logv(int level, const char *msg, va_list ap);
void pin_log_set_level(int level);
/* ---- clock.c ------------------------------------------------------------ */
int64_t pin_clock_now_us(void);
int64_t pin_clock_mono_us(void);
void pin_clock_set_offset_s(int64_t s);
char *pin_clock_fmt(int64_t us, char *out, size_t outlen);
char *pin_clock_fmt_ms(int64_t us, char *out, size_t outlen);
int pin_clock_parse(const char *s, int64_t *us_out);

/* ---- uuid.c ------------------------------------------------------------- */
void pin_uuid_v7(char out[37]);
/* n bytes of the kernel's generator through a per-thread pool (uuid.c) */
void pin_rand_bytes(unsigned char *b, size_t n);
int pin_uuid_valid(const char *s);

/* ---- config.c: declared keys (config_keys.c and the plugins'), key =
 * value files, PIN_<KEY> environment, flags (pin-host.conf(5)) ---------- */
int pin_config_load(const char *path);              /* syntax only; 0, -1 (logged) */
int pin_config_set(const char *key, const char *value);   /* a flag; NULL unsets */
/* Declares a plugin's keys (descriptor 1.7; stride = config_key_size).
 * Once per owner.  0; -1 with err for an invalid or conflicting key (the
 * others are declared). */
int pin_config_declare(const char *owner, const struct pin_config_key *keys,
		size_t stride, char *err, size_t errlen);
bool pin_config_owner_declared(const char *owner);
/* a plugin of ABI < 1.7 (declares nothing): unknown keys are warned, not refused */
void pin_config_note_undeclaring(const char *plugin);
/* Checks every file line, flag and PIN_<KEY> variable against the declared
 * keys; mode PIN_CFG_API/WORKER/MIGRATE or 0 (any).  Findings go to text
 * (human lines, --check-config, which also warns about keys of another
 * mode and PIN_* near misses) or, text NULL, to the log.  Returns the
 * number of errors; then resolves every key (read-only afterwards). */
int pin_config_check(unsigned mode, FILE *text);
/* --print-config: key = value  # source, secrets redacted */
int pin_config_print(FILE *out, unsigned mode);
/* --print-config-reference: format "md", "man" or "keys"; -1 unknown */
int pin_config_reference(FILE *out, const char *format);
bool pin_config_declared(const char *key);
/* A declared key's value (no default at the call site: the declaration
 * has it); an undeclared key is a bug, logged once: "" / 0 / false. */
const char *pin_config_str(const char *key);
long long pin_config_int(const char *key);
bool pin_config_bool(const char *key);
/* the ABI's config_get / config_int (1.0): def only for keys without a
 * declared default and for undeclared keys (an old plugin's own; the
 * scheduler's job.<name>.interval_ms of a job whose plugin declares none) */
const char *pin_config_get(const char *key, const char *def);
long long pin_config_int_def(const char *key, long long def);
void pin_config_free(void);
/* Reload (SIGHUP): re-reads path (flags and environment keep their values
 * and precedence) and checks it as a start would; a file with an unknown key
 * or an invalid value is refused whole.  Every changed key declared
 * PIN_CFG_RELOAD takes its new value (readers see it from their next read),
 * a changed key of another kind is logged by name and keeps its running
 * value.  apply (may be NULL) then puts the new values to work; if it fails
 * every key goes back.  0 reloaded (a new generation), -1 refused (the
 * running configuration stays); both fill *res.  mode: the host's mode bit
 * (keys of other modes are left alone). */
struct pin_config_reload_result {
	unsigned long generation;   /* live after the call */
	int applied;                /* reloadable keys whose value changed */
	int restart_only;           /* changed keys that wait for a restart */
	char why[160];              /* refused: the reason */
};
int pin_config_reload(const char *path, unsigned mode, int (*apply)(void),
		struct pin_config_reload_result *res);
unsigned long pin_config_generation(void);   /* 1 at start, +1 per reload */
/* Applies socket_mode (octal, default 0660) and socket_group (name; default:
 * the process's group) to the unix socket at path.  0, -1 (logged). */
int pin_config_socket_perms(const char *path);

/* ---- arena.c: per-invocation memory ------------------------------------- */
struct pin_arena;
struct pin_arena *pin_arena_new(void);
void pin_arena_free(struct pin_arena *a);
void pin_arena_reset(struct pin_arena *a);
/* the thread's current arena (set around every invocation) */
void pin_arena_set_current(struct pin_arena *a);
struct pin_arena *pin_arena_current(void);
void *pin_arena_alloc(size_t n);
char *pin_arena_strdup(const char *s);
char *pin_arena_sprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void pin_arena_track_result(PGresult *res);          /* PQclear at reset */
void pin_arena_track_json(json_object *o);           /* json_object_put at reset */
int pin_arena_track_free(void *p);                   /* free at reset; -1: not tracked */

/* ---- db.c: one connection per thread ------------------------------------ */
void pin_db_set_dsn(const char *dsn);
/* pg_dsn_read (NULL / "" none) and read_max_lag_s */
void pin_db_set_read_dsn(const char *dsn, double max_lag_s);
bool pin_db_read_configured(void);
/* For one request of a route_replica_ok route: the accessors use this
 * thread's standby link when it is fit (checked at most once a second),
 * true; else the primary (pin_db_read_fallback_total{reason}), false. */
bool pin_db_read_bind(void);
bool pin_db_read_bound(void);
/* The bound request failed on the standby: back to the primary (counted
 * with reason; the next request checks the standby again). */
void pin_db_read_fallback(const char *reason);
void pin_db_read_unbind(void);
PGconn *pin_db_conn(void);          /* connects / reconnects; NULL if down */
bool pin_db_up(void);               /* last known state of this thread's link */
void pin_db_close_thread(void);
/* API host with a db_concurrency cap: one primary + one standby link per
 * gate slot (n slots), shared by the threads in turn.  pin_db_slot_use(k)
 * makes slot k's links this thread's until pin_db_slot_use(-1) (the
 * thread's own links again; also unbinds the standby).  pin_db_pool_close
 * closes them all (no thread holds a slot then). */
int pin_db_pool_init(int n);
void pin_db_slot_use(int k);
int pin_db_slot_current(void);      /* the slot held, -1 none */
/* connects every slot's primary link now (host start): the first requests
 * do not wait for backends to start */
void pin_db_pool_connect(void);
void pin_db_pool_close(void);
PGresult *pin_db_exec(const char *sql, int n, const char *const *vals);
PGresult *pin_db_exec_prepared(const char *name, const char *sql, int n,
		const char *const *vals);
/* pin_db_exec_prepared with parameters in binary where fmts[i] is 1 (their
 * lengths in lens[i]); text results */
PGresult *pin_db_exec_prepared_fmt(const char *name, const char *sql, int n,
		const char *const *vals, const int *lens, const int *fmts);
/* the same with the result in binary format (ABI 1.5) */
PGresult *pin_db_exec_prepared_bin(const char *name, const char *sql, int n,
		const char *const *vals);
int pin_db_begin(void);
int pin_db_commit(void);
void pin_db_rollback(void);
bool pin_db_in_tx(void);
/* true once after a deadlock / serialization failure (40P01, 40001) on
 * this thread; clears the flag */
bool pin_db_take_conflict(void);
const char *pin_db_sqlstate(const PGresult *res);
/* The SQLSTATE of this thread's last failed statement since the last reset
 * ("" none; "08001"/"08006" no or a lost connection; 25P02 never: it only
 * echoes the statement that aborted the transaction).  The host resets it
 * before a request or a consumed message and reads it when the handler
 * failed, so plugins need not report classes through the ABI. */
void pin_db_error_reset(void);
const char *pin_db_last_error(void);
enum pin_db_class {
	PIN_DBC_NONE = 0,       /* no SQLSTATE recorded */
	PIN_DBC_TRANSIENT,      /* 08, 53, 57, 58, F0, XX, 25006, 25P03, 25P04,
				 * 40000/1/3, 40P01, 55006, 55P03, 72000: the
				 * database's state or capacity */
	PIN_DBC_DATA,           /* classes 22, 54: the input cannot be stored */
	PIN_DBC_INTEGRITY,      /* class 23 except the two below; 40002, 44000 */
	PIN_DBC_EXPECTED,       /* 23505 unique, 23P01 exclusion: handlers answer */
	PIN_DBC_PERMANENT       /* anything else (42xxx: our SQL or schema) */
};
enum pin_db_class pin_db_classify(const char *sqlstate);
const char *pin_db_constraint(const PGresult *res);
/* exec outside the arena: caller PQclears */
PGresult *pin_db_exec_raw(const char *sql, int n, const char *const *vals);

/* ---- metrics.c ---------------------------------------------------------- */
void pin_metric_add(const char *name, const char *labels, double v);
void pin_metric_set(const char *name, const char *labels, double v);
/* histogram in seconds (buckets 1 ms .. 60 s) */
void pin_metric_observe(const char *name, const char *labels, double v);
/* the histogram series with no observation yet (rendered with zero buckets) */
void pin_metric_hist_declare(const char *name, const char *labels);
/* records the process start time (main, first thing) */
void pin_metrics_init(void);
/* monotonic seconds, for durations */
double pin_metrics_mono_s(void);
/* worker host: plain-HTTP /metrics and /healthz on addr (host:port);
 * "" = off.  0 ok, -1 cannot listen (logged). */
int pin_metrics_listen_start(const char *addr);
void pin_metrics_listen_stop(void);
/* fn runs at the start of every render (gauges read from counters kept
 * outside the metrics lock); one per process, NULL to remove */
void pin_metrics_collector(void (*fn)(void));
/* malloc'd Prometheus text; caller frees */
char *pin_metrics_render(void);
void pin_metrics_free(void);

/* ---- outbox.c ----------------------------------------------------------- */
/* the events.md envelope text of a message (outbox.c; malloc'd, NULL: out of
 * memory): messageId, eventType, contractVersion 1, createdAt, aggregateType,
 * aggregateId, correlationId (the thread's trace id), payload */
char *pin_envelope_text(const char *mid, const char *ts, const char *event_type,
		const char *aggregate_type, const char *aggregate_id, json_object *payload);
int pin_outbox_put(const char *topic, const char *key, const char *event_type,
		const char *aggregate_type, const char *aggregate_id,
		json_object *payload);
/* ABI 1.1: the same into table (NULL = calendar.outbox), which must be
 * calendar.outbox or registered by a plugin (pin_reg.outboxes). */
int pin_outbox_put_to(const char *table, const char *topic, const char *key,
		const char *event_type, const char *aggregate_type,
		const char *aggregate_id, json_object *payload);
#define PIN_OUTBOX_DEFAULT "calendar.outbox"
/* ABI 1.4: n messages (stride msg_size) into table in one statement */
int pin_outbox_put_many(const char *table, const struct pin_outbox_msg *msgs,
		size_t n, size_t msg_size);

/* ---- trace.c ------------------------------------------------------------ */
/* correlation id of the current invocation (thread-local), may be NULL;
 * logged as traceId (log.c) and written as the outbox correlationId */
void pin_trace_set(const char *trace_id);
const char *pin_trace_get(void);
/* W3C trace context.  pin_trace_start: continue the trace of incoming (a
 * valid version-00 traceparent) or start a new one; a new span id either
 * way.  Sets the thread's trace id (the 32-hex trace-id) and traceparent;
 * returns the trace id.  pin_trace_set(NULL) clears both. */
bool pin_traceparent_valid(const char *tp);
const char *pin_trace_start(const char *incoming);
const char *pin_traceparent_get(void);

/* ---- registry.c / loader.c --------------------------------------------- */
struct pin_route_entry {
	struct pin_route r;
	char **segs;          /* pattern split on '/' */
	int nsegs;
	const char *plugin;
	bool replica_ok;      /* ABI 1.3 route_replica_ok: reads go to pg_dsn_read */
};
struct pin_job_entry {
	struct pin_job j;
	const char *plugin;
};
struct pin_consumer_entry {
	struct pin_consumer c;
	char **topics;        /* owned copy, NULL-terminated */
	const char *plugin;
};
struct pin_registry {
	struct pin_route_entry *routes; size_t nroutes;
	struct pin_job_entry *jobs; size_t njobs;
	struct pin_consumer_entry *consumers; size_t nconsumers;
	/* outbox tables the relay serves: [0] is always calendar.outbox,
	 * then what plugins registered (ABI 1.1), without duplicates */
	char **outboxes; size_t noutboxes;
};
/* true when table is one of pin_reg.outboxes (calendar.outbox included) */
bool pin_outbox_known(const char *table);
extern struct pin_registry pin_reg;
extern const struct pin_host_api pin_api;

/* Loads plugins from a comma list ("calendar,slots") or paths ending .so,
 * looked up in dir.  0 ok; -1: logged, already unloaded. */
int pin_plugins_load(const char *list, const char *dir);
/* Declares the configuration keys of every plugin in dir and of the .so
 * paths in list, from their descriptors (no init).  0; -1 when one could
 * not be read (logged, WARN). */
int pin_plugins_declare(const char *list, const char *dir);
void pin_plugins_unload(void);
/* Loads one plugin file: returns 0, or -1 with a reason in err. */
int pin_plugin_load_file(const char *path, char *err, size_t errlen);
void pin_registry_free(void);
struct pin_registrar *pin_registrar_new(const char *plugin);
/* the plugin's abi_minor (default: the host's): which members of the
 * records it registers exist (pin_consumer.batch_fn from 1.4 on) */
void pin_registrar_set_minor(struct pin_registrar *r, int abi_minor);
void pin_registrar_free(struct pin_registrar *r);

/* ---- router.c ----------------------------------------------------------- */
#define PIN_MAX_PARAMS 8
struct pin_match {
	const struct pin_route_entry *e;
	int nparams;
	const char *names[PIN_MAX_PARAMS];
	char *values[PIN_MAX_PARAMS];    /* malloc'd; pin_match_clear frees */
	bool method_mismatch;            /* path matched, method did not */
};
int pin_route_compile(struct pin_route_entry *e);   /* 0 / -1 bad pattern */
void pin_route_entry_clear(struct pin_route_entry *e);
/* 0 found, -1 not found (m->method_mismatch tells 405 vs 404) */
int pin_router_match(const struct pin_route_entry *routes, size_t n,
		const char *method, const char *path, struct pin_match *m);
void pin_match_clear(struct pin_match *m);
/* The Allow value of path (RFC 9110 10.2.1) into out: the methods of the
 * routes whose pattern matches it, HEAD with GET, comma-separated in the
 * order GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, then others in table
 * order.  Returns how many (0: no route has the path), -1 when out is too
 * small (out then holds the ones that fit). */
int pin_router_allow(const struct pin_route_entry *routes, size_t n,
		const char *path, char *out, size_t outlen);

/* ---- utf8.c: strict text checks ------------------------------------------ */
/* true: RFC 3629 well-formed (no overlongs, no surrogates, nothing above
 * U+10FFFF) and no NUL byte -- exactly what a PostgreSQL text value takes */
bool pin_utf8_valid(const char *s, size_t len);
#define PIN_UTF8_INVALID -1     /* a string or key is not valid UTF-8 */
#define PIN_UTF8_NUL     -2     /* a string holds U+0000 (json-c truncates) */
/* Walks every string and key of o.  0, or PIN_UTF8_* with the field path
 * ("a.b[2].c", "" for the root) of the first offender in where. */
int pin_utf8_check_json(json_object *o, char *where, size_t wlen);

/* ---- json.c: helpers ---------------------------------------------------- */
/* Parses at most len bytes; NULL on invalid JSON (err filled). */
json_object *pin_json_parse(const char *buf, size_t len, char *err, size_t errlen);
/* s quoted as json-c prints it (PLAIN | NOSLASHESCAPE) into o, which has room
 * for PIN_JSON_QUOTED_MAX(strlen(s)); returns the end, not terminated */
#define PIN_JSON_QUOTED_MAX(n) (6 * (n) + 2)
char *pin_json_quote(char *o, const char *s);
/* RFC 9457 body: malloc'd string; errors borrowed. */
char *pin_problem_body(int status, const char *code, const char *detail,
		const char *trace_id, json_object *errors);
const char *pin_status_title(int status);
/* URL-decodes src into a malloc'd string; NULL on bad escape or %00.
 * pin_url_decode: a query string ('+' is a space);
 * pin_url_decode_path: a path segment (RFC 3986: '+' is itself) */
char *pin_url_decode(const char *src, size_t len);
char *pin_url_decode_path(const char *src, size_t len);

/* ---- migrate.c ------------------------------------------------------------ */
int pin_migrate(const char *sqldir);  /* 0 ok, -1 logged */

/* shutdown flag set by the signal thread (main.c) */
extern volatile int pin_stopping;
void pin_wait_stop(void);                 /* blocks until SIGTERM/SIGINT */
void pin_request_stop(void);              /* sets pin_stopping, wakes waiters */
/* sleeps up to ms, returns early (non-zero) when stopping */
int pin_sleep_ms(int ms);

/* A stop signal for one subsystem (jobs, relay): threads sleep on it and
 * wake at once when it is raised.  Monotonic clock. */
struct pin_waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
};
void pin_waiter_init(struct pin_waiter *w);
void pin_waiter_destroy(struct pin_waiter *w);
/* sleeps up to ms; true when the waiter was stopped (or the host stops) */
bool pin_waiter_sleep(struct pin_waiter *w, int ms);
bool pin_waiter_stopped(struct pin_waiter *w);
void pin_waiter_stop(struct pin_waiter *w);

#endif

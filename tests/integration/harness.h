/*
 * harness.h -- helpers for the integration suites (tests/integration).
 *
 * The suites run against the stack ./dev test starts (real PostgreSQL, the
 * dev Kafka broker, nginx -> API host, a long-lived worker host).  The stack
 * is described by environment variables:
 *
 *   PIN_BASE_URL          http://127.0.0.1:<port> (nginx)
 *   PIN_PG_DSN            postgresql://postgres@127.0.0.1:<port>/pin
 *   PIN_KAFKA_BOOTSTRAP   broker address at start (use h_kafka_bootstrap())
 *   PIN_KAFKA_BOOTSTRAP_FILE  file holding the current address (re-read it)
 *   PIN_DEV_DIR           state dir of the test stack (logs/, pids/)
 *   PIN_JWT_SECRET_FILE   HS256 secret of the hosts
 *   PIN_HOST_BIN          pin-host binary; PIN_BROKER_BIN pin-devbroker binary
 *   PIN_PLUGIN_DIR        plugin .so dir; PIN_FIXTURE_DIR fixture .so dir
 *   PIN_CONFIG            the hosts' config file (allow_clock_offset = true)
 *   PIN_API_SOCK          the API host's FastCGI socket (nginx's upstream)
 *   PIN_WORKER_PLUGINS    plugin list of the worker host (incl. testcons path)
 *   PIN_API_PLUGINS       plugin list of the API host
 *   PIN_PG_BIN, PIN_PG_DATA, PIN_PG_LOG, PIN_PG_OPTS
 *                         the cluster's pg_ctl dir, data dir, log and server
 *                         options (the ops suite stops and starts it)
 *
 * Memory: every pointer a h_* function returns (responses, strings, message
 * lists, SQL results) is owned by the harness and freed after the test
 * (h_tcase() installs the teardown).  Freeing early with h_resp_free() is
 * allowed but never required.
 *
 * Failures: helpers ck_abort_msg() on infrastructure errors (no connection,
 * curl failure); HTTP status codes are returned, not asserted.
 */
#ifndef PIN_HARNESS_H
#define PIN_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <check.h>
#include <json-c/json.h>
#include <libpq-fe.h>

/* ---- the suites (one per file, listed in check-integration.c) ---------- */
/* A fresh message id (uuid text). */
char *h_new_mid(void);
/* The events.md envelope (contractVersion 1) around payload (JSON text). */
char *h_envelope(const char *mid, const char *event_type, const char *agg_type,
		const char *agg_id, const char *created_at, const char *payload);
/* ip when this machine can bind a socket to it (a loopback alias such as
 * 127.0.0.42, so nginx's per-address limits see another client), else NULL. */
const char *h_src_ip(const char *ip);

Suite *make_http_suite(void);
Suite *make_kafka_suite(void);
Suite *make_calendar_suite(void);
Suite *make_slots_suite(void);
Suite *make_timeoff_suite(void);
Suite *make_appointments_suite(void);
Suite *make_notify_suite(void);
Suite *make_crm_suite(void);
Suite *make_team_suite(void);    /* issue 12: departed agents, manager views */
Suite *make_feed_suite(void);    /* issue 32: the agent's iCalendar feed */
Suite *make_stream_suite(void);   /* real-time in-app: nchan + Chromium */
Suite *make_delivery_suite(void);   /* issue 10: dispatcher, relay parking */
Suite *make_imip_suite(void);       /* issue 32: invitations in the e-mails */
Suite *make_input_suite(void);      /* issue 9: strict input, SQLSTATE classes */
Suite *make_manage_suite(void);     /* issue 32 item 3: investors' manage links */
Suite *make_obs_suite(void);     /* issue 11: worker metrics, histograms, promtool */
Suite *make_metrics_suite(void); /* issue 30: the seeds' metric names, alerts' metrics */
Suite *make_replica_suite(void);  /* issue 15: showcase on a hot standby */
Suite *make_fcgi_suite(void);     /* the API host's FastCGI server */
Suite *make_reload_suite(void);   /* SIGHUP: key rotation, refused files */
Suite *make_migrate_suite(void);  /* pin-host --migrate on scratch databases */
Suite *make_ops_suite(void);     /* stops PostgreSQL for a moment */
Suite *make_scale_suite(void);   /* issue 15: several worker hosts, failover */
Suite *make_relaycursor_suite(void);  /* issue 31: the relay's commit-ordered cursor */
Suite *make_faults_suite(void);  /* last: fault drills (kill -9, outages, poison) */

/* A test case with the harness teardown and a generous timeout (seconds,
 * scaled by CK_TIMEOUT_MULTIPLIER as usual).  Use it instead of tcase_create. */
TCase *h_tcase(const char *name, int timeout_s);

/* ---- environment -------------------------------------------------------- */
/* Value of the variable; aborts the test when it is not set. */
const char *h_env(const char *name);
/* Value or def. */
const char *h_env_opt(const char *name, const char *def);

/* ---- strings / ids ------------------------------------------------------ */
char *h_strdup(const char *s);                                /* harness-owned */
char *h_sprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *h_uuid(void);                                           /* random v4 */
/* ISO-8601 UTC ("2026-12-01T09:00:00Z") of now + offset_s (wall clock). */
char *h_iso_in(int64_t offset_s);
/* YYYY-MM-DD (UTC) of today + days. */
char *h_date_in(int days);

/* ---- HTTP (libcurl) ----------------------------------------------------- */
struct h_resp {
	long status;
	char *body;               /* NUL-terminated, "" when empty */
	size_t body_len;
	json_object *json;        /* parsed body or NULL */
	char *content_type;       /* NULL when absent */
	char *location;
	char *etag;
	char *retry_after;
	char *headers;            /* every header: "Name: value\n" lines */
};
/* The first value of header name (case-insensitive; harness-owned), NULL
 * when the response has none. */
const char *h_header(const struct h_resp *r, const char *name);

struct h_req_opts {
	const char *body;              /* NULL: no body */
	size_t body_len;               /* 0: strlen(body) */
	const char *content_type;      /* NULL: application/json when body */
	const char *const *headers;    /* NULL-terminated "Name: value" list */
	const char *source_ip;         /* bind the client to this address */
};

/* method "GET"/"POST"/...; path "/api/v1/..." (appended to PIN_BASE_URL);
 * token NULL or a JWT (sent as Bearer); json_body NULL or JSON text;
 * then extra "Name: value" headers, NULL-terminated (the macro adds it). */
struct h_resp *h_request_(const char *method, const char *path, const char *token,
		const char *json_body, ...);
#define h_request(method, path, token, body, ...) \
	h_request_((method), (path), (token), (body), ##__VA_ARGS__, (const char *)NULL)
struct h_resp *h_request_opts(const char *method, const char *path,
		const char *token, const struct h_req_opts *o);
#define h_get(path, token) h_request("GET", (path), (token), NULL)
/* The whole file (h_strdup), NULL when it cannot be opened. */
char *h_slurp(const char *path);
/* REQUEST sent as given to nginx over a plain socket (what libcurl would not
 * send or would normalise: a raw request line, an HTTP version, a transfer
 * coding); the whole answer (h_strdup, at most 8 KiB), read until nginx
 * closes or 5 s pass. */
char *h_http_raw(const char *request);
#define h_post(path, token, body) h_request("POST", (path), (token), (body))
void h_resp_free(struct h_resp *r);
/* n POSTs of bodies[i] with Bearer tokens[i] (NULL: none) to path, all in
 * flight at once (curl multi, one connection each), from source_ip when not
 * NULL.  The responses in request order (harness-owned array). */
struct h_resp **h_post_all(const char *path, int n, char *const *bodies,
		char *const *tokens, const char *source_ip);

/* A harness-owned response made from json (ownership passes to it): body is
 * its text.  For results computed outside HTTP that the same assertions read. */
struct h_resp *h_resp_json(long status, json_object *json);

/* For suites that drive libcurl themselves (curl multi): a growing,
 * NUL-terminated buffer and the CURLOPT_WRITEFUNCTION that appends to it
 * (CURLOPT_WRITEDATA = the struct h_buf *).  The caller frees p. */
struct h_buf {
	char *p;
	size_t n;
};
size_t h_curl_write(char *data, size_t size, size_t nmemb, void *ud);

/* String member of a JSON object (NULL when absent or not an object). */
const char *h_jstr(json_object *o, const char *key);
/* Member lookup, NULL when absent. */
json_object *h_jget(json_object *o, const char *key);
/* Asserts a problem+json answer: status, content type, body.code. */
void h_assert_problem(const struct h_resp *r, long status, const char *code);
/* The problem's errors[] names exactly these fields (any order). */
void h_assert_error_fields_(const struct h_resp *r, ...);
#define h_assert_error_fields(r, ...) \
	h_assert_error_fields_((r), __VA_ARGS__, (const char *)NULL)

/* ---- JWT (HS256 with the stack's secret) ---------------------------------- */
struct h_token_opts {
	const char *actor;             /* "agent", ... (NULL: claim absent) */
	const char *sub;
	const char *tenant;            /* NULL: no tenant_id claim */
	const char *const *perms;      /* NULL-terminated */
	int64_t exp_in_s;              /* 0: 3600 */
	int64_t nbf_in_s;              /* 0: no nbf claim */
	const char *iss;               /* NULL: "pin-dev" */
	const char *aud;               /* NULL: "pin-calendar" */
	const char *secret;            /* NULL: PIN_JWT_SECRET_FILE */
	bool no_exp;                   /* omit exp */
};
char *h_token_opts(const struct h_token_opts *o);
/* An agent of tenant (NULL: a new one) with a token for managing slots and
 * viewing and deciding appointments, plus extra_perm when not NULL. */
struct h_agent {
	char *id, *tenant, *token;
};
struct h_agent h_agent_new(const char *tenant, const char *extra_perm);
/* h_token("agent", sub, tenant_or_NULL, "perm1", "perm2") */
char *h_token_(const char *actor, const char *sub, const char *tenant, ...);
#define h_token(actor, sub, tenant, ...) \
	h_token_((actor), (sub), (tenant), ##__VA_ARGS__, (const char *)NULL)

/* ---- PostgreSQL ----------------------------------------------------------- */
PGconn *h_pg(void);                       /* the test's connection (cached) */
/* Runs sql with text params (NULL-terminated list; the macro adds it);
 * asserts success; result freed after the test. */
PGresult *h_sql_(const char *sql, ...);
#define h_sql(sql, ...) h_sql_((sql), ##__VA_ARGS__, (const char *)NULL)
/* First column of the first row, NULL when no row or SQL NULL. */
char *h_sql_scalar_(const char *sql, ...);
#define h_sql_scalar(sql, ...) h_sql_scalar_((sql), ##__VA_ARGS__, (const char *)NULL)
/* Same as an integer (-1 when no row / NULL). */
long long h_sql_int_(const char *sql, ...);
#define h_sql_int(sql, ...) h_sql_int_((sql), ##__VA_ARGS__, (const char *)NULL)

/* ---- time zones (the test PostgreSQL's tz database) ------------------------ */
/* One change of a zone's UTC offset. */
struct h_tz_change {
	char date[11];        /* local date of the change (old reading), YYYY-MM-DD */
	char at[21];          /* the instant, "2027-03-28T01:00:00Z" */
	long long at_s;       /* the same, seconds since the epoch */
	int before_min;       /* UTC offset before it, minutes (Berlin spring: 60) */
	int after_min;        /* after it (120) */
};
/* The first change of zone's UTC offset whose local date lies in [from, to]
 * (YYYY-MM-DD) and whose direction is dir (+1 the offset grows: spring
 * forward; -1 it shrinks: fall back; 0 either).  Walks the days comparing
 * the offsets of local noon, then the minutes of the day before to find the
 * instant.  0 found (*out filled), -1 none in the range. */
int h_tz_next_change(const char *zone, const char *from, const char *to, int dir,
		struct h_tz_change *out);

/* ---- Kafka ---------------------------------------------------------------- */
struct h_kmsg {
	char *topic;
	int32_t partition;
	int64_t offset;
	char *key;                 /* NULL when absent */
	char *value;               /* NUL-terminated */
	size_t value_len;
	json_object *json;         /* parsed value or NULL */
	int64_t ts_ms;
	size_t nheaders;           /* Kafka headers, in message order */
	struct h_kheader {
		char *name;
		char *value;       /* NUL-terminated; NULL for a null value */
	} *headers;
};
struct h_kmsgs {
	size_t n;
	struct h_kmsg *v;
};
/* Value of the last header called name (DLQ: "x-error-code",
 * "x-original-topic"); NULL when absent or null. */
const char *h_kmsg_header(const struct h_kmsg *m, const char *name);
/* Current bootstrap address (re-read from PIN_KAFKA_BOOTSTRAP_FILE). */
char *h_kafka_bootstrap(void);
/* Every message on topic, from the beginning of all partitions, read until
 * EOF on each partition (or timeout_ms).  Never NULL. */
struct h_kmsgs *h_kafka_read_all(const char *topic, int timeout_ms);
/* Polls h_kafka_read_all until a message satisfies match (NULL = any) or
 * timeout_ms passes.  Returns the message or NULL. */
const struct h_kmsg *h_kafka_wait(const char *topic, int timeout_ms,
		bool (*match)(const struct h_kmsg *m, void *ud), void *ud);
/* First message whose key equals key, waiting up to timeout_ms. */
const struct h_kmsg *h_kafka_wait_key(const char *topic, const char *key, int timeout_ms);
/* DLQ: the x-error-code header of the first message on topic that
 * satisfies match (NULL = any) and carries one, waiting up to timeout_ms;
 * NULL when none did. */
const char *h_kafka_error_code(const char *topic, int timeout_ms,
		bool (*match)(const struct h_kmsg *m, void *ud), void *ud);
/* Produces one message (murmur2_random partitioner, like Java clients) and
 * waits for delivery.  0 ok, -1 error (logged to stderr). */
int h_kafka_produce(const char *topic, const char *key, const char *value);
/* Same with an explicit length (value may hold NUL bytes); value NULL
 * produces a message with a null value (a tombstone). */
int h_kafka_produce_raw(const char *topic, const char *key, const void *value,
		size_t len);
/* Produces n messages with the same key from one producer (linger 200 ms:
 * one record batch, so the dev broker hands them out in one fetch) and waits
 * for every delivery.  0 ok, -1 error. */
int h_kafka_produce_batch(const char *topic, const char *key, const char *const *values,
		int n);
/* The same with a key per message (keys[i]), all in partition 0 (key is
 * not used then): one record batch holding several keys. */
int h_kafka_produce_batch_keys(const char *topic, const char *const *keys,
		const char *key, const char *const *values, int n);

/* Stops the dev broker of the stack (SIGTERM, waits for exit). */
void h_broker_stop(void);
/* Starts a new dev broker (new random port; the bootstrap file is rewritten,
 * hosts re-read it); returns when the address is published. */
void h_broker_start(void);
/* Takes the dev broker down (SIGUSR1: connections closed and refused) and
 * brings it back (SIGUSR2) in the same process: same port, topics, messages
 * and committed offsets -- a broker restart over its log. */
void h_broker_down(void);
void h_broker_up(void);
/* The next count requests of Kafka API api_key (8: OffsetCommit) fail with
 * error err (the dev broker's error injection, SIGURG). */
void h_broker_inject(int api_key, int count, int err);

/* ---- hosts ---------------------------------------------------------------- */
/* Runs PIN_HOST_BIN --mode worker --once with the stack's config and the
 * worker plugins (every job once + the outbox relay), clock shifted by
 * clock_offset_s.  Output goes to $PIN_DEV_DIR/logs/worker-once.log.
 * Returns the exit status (0 ok). */
int h_run_worker_once(int64_t clock_offset_s);

/* Same with an explicit plugin list (NULL = PIN_WORKER_PLUGINS) and extra
 * NULL-terminated argv entries (may be NULL). */
int h_run_host(const char *mode, const char *plugins, int64_t clock_offset_s,
		const char *const *extra_args);

/* Same host started in the background (the caller waits for or kills the
 * returned pid). */
pid_t h_spawn_host(const char *mode, const char *plugins, int64_t clock_offset_s,
		const char *const *extra_args);

/* true when a line of the stack's log file name ($PIN_DEV_DIR/logs/name)
 * holds both a and b */
bool h_log_has(const char *name, const char *a, const char *b);

/* The pid of the long-lived host of the stack ("worker" or "api"), read
 * from $PIN_DEV_DIR/pids/<name>.pid; -1 when it does not run. */
long h_host_pid(const char *name);
/* kill -9 of the long-lived worker host; returns when it is gone. */
void h_worker_kill9(void);
/* Starts the long-lived worker host again the way ./dev does (same config,
 * plugins, log and pid file; ./dev's stack stop stops it). */
void h_worker_start(void);
/* Lines of $PIN_DEV_DIR/logs/worker.log holding both needles. */
int h_worker_log_lines(const char *n1, const char *n2);
/* The same for the stack's log file name ($PIN_DEV_DIR/logs/name). */
int h_log_lines(const char *name, const char *n1, const char *n2);

/* ---- several hosts (the scale suite) ----------------------------------------- */
/* A host of the stack: the long-lived worker (h_host_stack_worker) or one
 * started by h_host_start. */
struct h_host {
	char name[32];             /* "worker", "worker-2", ... */
	pid_t pid;                 /* -1: not running */
	bool ours;                 /* started (and reaped) by this process */
	char url[96];              /* its metrics_listen /metrics ("" none) */
};
/* The stack's long-lived worker host (pids/worker.pid, PIN_WORKER_METRICS_URL). */
void h_host_stack_worker(struct h_host *h);
/* Starts a long-lived host NAME the way ./dev starts host K of `./dev up
 * --worker-hosts M`: its own log (logs/NAME.log), pid file (pids/NAME.pid;
 * ./dev's stack stop stops it if the test does not) and metrics_listen
 * port; plugins NULL = PIN_WORKER_PLUGINS; env: extra "PIN_<KEY>=value"
 * config overrides, NULL-terminated (may be NULL).  Returns when the host
 * answers on its metrics port. */
void h_host_start(struct h_host *h, const char *name, const char *mode,
		const char *plugins, int64_t clock_offset_s, const char *const *env);
/* kill -9; returns when it is gone (reaped). */
void h_host_kill9(struct h_host *h);
/* SIGTERM, up to 20 s, then SIGKILL; removes the pid file.  No-op when
 * the host does not run or is not ours. */
void h_host_stop(struct h_host *h);
/* ---- the outbox relay's two modes (operating.md "Outbox relay cursor") -------
 * The stack relays by the commit-ordered cursor (the default).  A case of
 * marking (relay_cursor = false) runs a host of its own in place of the
 * stack's worker: */
/* operating.md "Switching back": once no relay session is left, what the
 * cursors passed marked published and the cursors removed */
void h_relay_switch_back(void);
/* The stack's worker stopped, the switch back, and host "worker-marking"
 * with relay_cursor = false started: returns when it leads every shard of
 * both outboxes. */
void h_relay_marking_start(struct h_host *h);
/* That host stopped (no-op when it does not run) and the stack's worker
 * started again (it goes over to the cursor by itself). */
void h_relay_marking_stop(struct h_host *h);

/* The value of one series on the host's /metrics: series is the exact text
 * before the value ('pin_x{group="g"}'); NAN when absent or no answer. */
double h_host_metric(const struct h_host *h, const char *series);
/* The sum of every series of the metric name (any labels) on the host's
 * /metrics; NAN when there is none or no answer. */
double h_host_metric_sum(const struct h_host *h, const char *name);
/* The same series looked up in Prometheus text; NAN when absent. */
double h_metric_in(const char *text, const char *series);

/* ---- waiting ---------------------------------------------------------------- */
void h_sleep_ms(int ms);
int64_t h_now_ms(void);
/* Evaluates cond every 100 ms until true or timeout_ms; value of cond. */
#define H_WAIT_UNTIL(cond, timeout_ms) ({                                 \
	int64_t h_wu_end_ = h_now_ms() + (timeout_ms);                    \
	bool h_wu_ok_;                                                    \
	while (!(h_wu_ok_ = (cond)) && h_now_ms() < h_wu_end_)            \
		h_sleep_ms(100);                                          \
	h_wu_ok_; })

/* ---- headless Chromium over the DevTools protocol (cdp.c) -------------------- */
/* Starts the driver (node tests/integration/cdp.mjs, PIN_SOURCE_DIR; browser
 * PIN_CHROMIUM, default chromium) and waits up to 60 s for it to be ready;
 * h_cdp_stop closes it (killed after 10 s) and may be called when none runs. */
void h_cdp_start(void);
void h_cdp_stop(void);
/* One command (a JSON object's text, see cdp.mjs); the answer's "value" as
 * JSON text ("null" when none).  Fails the test when the driver reports an
 * error or does not answer within 30 s.  h_cdp_op sends {op: arg under key}. */
char *h_cdp(const char *cmd);
char *h_cdp_op(const char *op, const char *key, const char *arg);

/* ---- FastCGI straight to an API host's socket (fcgi_client.c) ---------------- */
struct h_fcgi_record {
	int type;
	unsigned id;
	size_t len;
	char *body;                /* malloc'd, NUL-terminated; freed by the next read */
};
/* -1 when nothing listens at path */
int h_fcgi_connect(const char *path);
bool h_fcgi_write(int fd, const void *p, size_t n);
/* One record's bytes (header + body, no padding) into out; their count. */
size_t h_fcgi_rec_bytes(unsigned char *out, int type, unsigned id,
		const void *body, size_t len);
bool h_fcgi_rec(int fd, int type, unsigned id, const void *body, size_t len);
/* Name-value pairs: one appended at buf[at] (cap bytes), new length; or the
 * PARAMS of a request as nginx sends them (method, uri with its query, a
 * bearer token and a JSON body's headers when not NULL). */
size_t h_fcgi_param(unsigned char *buf, size_t at, size_t cap, const char *k,
		const char *v);
size_t h_fcgi_params(unsigned char *buf, size_t cap, const char *method,
		const char *uri, const char *token, const char *body);
/* The next record, waiting up to timeout_ms; false on EOF or timeout. */
bool h_fcgi_read_rec(int fd, int timeout_ms, struct h_fcgi_record *r);
/* Records of request id up to its END_REQUEST: the STDOUT stream as a CGI
 * response (status 0 when none came), *nstdout the non-empty STDOUT records,
 * *proto the END_REQUEST's protocolStatus (-1: the connection ended first). */
struct h_resp *h_fcgi_response(int fd, unsigned id, int *nstdout, int *proto);
/* One whole request as request id on fd (keep: FCGI_KEEP_CONN), its records
 * in one write as nginx sends them; h_fcgi_send does not wait for the
 * answer (h_fcgi_response reads it). */
bool h_fcgi_send(int fd, unsigned id, bool keep, const char *method,
		const char *uri, const char *token, const char *body);
struct h_resp *h_fcgi_on(int fd, unsigned id, bool keep, const char *method,
		const char *uri, const char *token, const char *body);
/* The same on a new connection to sock, closed after the answer; status 0
 * when the host could not be reached. */
struct h_resp *h_fcgi(const char *sock, const char *method, const char *uri,
		const char *token, const char *body);
/* Spawns an API host with the stack's API plugins on its own unix socket
 * sock (extra: more arguments, NULL-terminated, may be NULL), writes
 * pids/NAME.pid so that ./dev's stack stop ends it, and returns its pid once
 * the socket exists. */
pid_t h_fcgi_host_start(const char *sock, const char *name, const char *const *extra);
/* A series of the /metrics of the API host at sock (200 asserted); NAN
 * when absent. */
double h_fcgi_metric(const char *sock, const char *series);

/* Frees everything the harness handed out (run by h_tcase's teardown). */
void h_cleanup(void);

#endif

/*
 * pin/plugin.h -- THE plugin ABI of pin-host.
 *
 * A plugin includes this header (plus libpq-fe.h and json-c, which are part of
 * the contract) and nothing else from the host.  It exports exactly one
 * symbol, pin_plugin_desc(), returning a pointer to a static descriptor.
 *
 * Compatibility rule (checked by the loader before init is called):
 *   desc->abi_major == PIN_ABI_MAJOR of the host, and
 *   desc->abi_minor <= PIN_ABI_MINOR of the host.
 * Anything else: the host logs which field mismatched, dlclose()s the plugin
 * and exits non-zero.
 *
 * Both tables below (struct pin_host_api, struct pin_registrar) start with
 * their own size and ONLY EVER GROW AT THEIR END.  A plugin built against
 * minor N may use a member only if api->size covers it (PIN_API_HAS()).
 *
 * Ownership conventions used in the comments:
 *   "borrowed"  the caller keeps ownership; valid for the stated lifetime.
 *   "arena"     memory belongs to the current invocation's arena (one HTTP
 *               request, one job run, one consumed message) and is freed by
 *               the host when the invocation returns.  Never free() it.
 *   "transfers" ownership passes to the callee, which frees it.
 *
 * Threading: handlers run on host threads (API: one of --threads FastCGI
 * threads; worker: one thread per job and per consumer).  Every thread owns
 * one PostgreSQL connection, reached with api->db().  Plugins keep no
 * per-request state in globals.
 *
 * ABI changelog (newest last; append only)
 *   2026-11-30  1.0  first version: routes, jobs, consumers, db, outbox,
 *                    clock, config, log, metrics, arena, uuid.
 *   2026-12-01  1.1  per-context outboxes: pin_registrar.outbox (a plugin
 *                    names the outbox table of its schema, e.g.
 *                    "notifications.outbox"; the relay serves every
 *                    registered outbox plus calendar.outbox) and
 *                    pin_host_api.outbox_put_to (write into one of them).
 *                    outbox_put keeps writing calendar.outbox, so 1.0
 *                    plugins work unchanged.  The consumer inbox already is
 *                    per registration (pin_consumer.inbox_table).
 *   2026-12-01  1.2  pin_host_api.metric_observe: a histogram observation
 *                    in seconds (buckets 1 ms .. 60 s).
 *   2026-12-01  1.3  pin_registrar.route_replica_ok: a registered GET
 *                    route declares that it only reads and tolerates a few
 *                    seconds of staleness; with pg_dsn_read set, its
 *                    api->db() is the hot standby (plugin code unchanged).
 *   2026-12-01  1.4  pin_host_api.outbox_put_many (struct pin_outbox_msg):
 *                    a batch of messages into one outbox table in ONE
 *                    statement (same envelope as outbox_put, one log line
 *                    per batch); the reminder dispatcher uses it.
 *   2026-12-01  1.4  [consume] pin_consumer.batch_fn: an optional set-based
 *                    batch handler (pin_consumer_batch_fn), and
 *                    pin_consumer.batch_max: the consumer's own cap on the
 *                    messages of one batch transaction.  The host reads
 *                    them only from plugins built against >= 1.4 (older
 *                    plugins' records end before them); without batch_fn a
 *                    consumer keeps the per-message path.
 *   2026-12-02  1.4  [crm] pin_consumer.batch_max caps the savepoint
 *                    batches only; a set batch (batch_fn) may be larger
 *                    (consumer_batch_set_max).  No layout change.
 *   2026-12-02  1.5  pin_host_api.run_shards: a job runs n shards of its
 *                    work at once, each on its own thread and database
 *                    connection (the reminder dispatcher on both cores);
 *                    pin_host_api.db_exec_prepared_bin: results in
 *                    PostgreSQL's binary format (the read paths).
 *   2026-12-03  1.6  pin_host_api.respond_json_text: a response whose body
 *                    is JSON text already (sdk/jtext pages), sent without
 *                    a json-c object and without a copy.
 *   2026-12-04  1.7  declared configuration: struct pin_config_key, and
 *                    pin_plugin.config_keys / config_key_size: the keys a
 *                    plugin reads, with type, default, modes, bounds,
 *                    secrecy and a description, read from the descriptor
 *                    without calling init (pin-host --check-config knows
 *                    the keys of every plugin in plugin_dir); a key that
 *                    neither the host nor a plugin declares refuses the
 *                    start.  pin_host_api.config_str / config_num /
 *                    config_bool read a declared key (no default at the
 *                    call site).  config_get / config_int keep working:
 *                    for a declared key the declared default replaces def.
 *                    Plugins built against < 1.7 declare nothing; while
 *                    one is loaded or in plugin_dir, unknown keys are
 *                    logged (WARN) instead of refused.
 *   2026-12-05  1.8  the seeds' consumer metrics kept by the host
 *                    (issue 30): pin_consumer.dlq_metric, a counter the
 *                    host adds 1 to for EVERY message of the consumer that
 *                    reaches its DLQ (invalid envelope, FATAL, a retry
 *                    deadline passed -- whoever decided it), 0 from the
 *                    start; and pin_consumer.lag_metric, a gauge the host
 *                    keeps at the age in seconds of the oldest message of
 *                    the consumer not yet handled (0 when caught up; it
 *                    grows while the consumer is stalled).  The plugin no
 *                    longer counts or sets them itself.  And
 *                    pin_consumer.version_metric, a counter of the
 *                    group's messages of a contractVersion other than 1
 *                    (seed 004's contract_mismatch_total).  metric_observe:
 *                    a name ending in "_ms" is observed in milliseconds
 *                    (buckets 1 ms .. 60000 ms); any other in seconds.
 *                    Plugins built against < 1.8 have neither member.
 *   2026-12-05  1.9  pin_host_api.respond_body: a response of any media
 *                    type (text/html of the investors' manage page, issue
 *                    32 item 3), the body malloc'd and handed to the host.
 */
#ifndef PIN_PLUGIN_H
#define PIN_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>
#include <json-c/json.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PIN_ABI_MAJOR 1
#define PIN_ABI_MINOR 9

/* True when the (size-prefixed) table t has member m. */
#define PIN_API_HAS(t, m) \
	((t)->size >= offsetof(__typeof__(*(t)), m) + sizeof((t)->m))

/* ---- return codes ------------------------------------------------------- */
#define PIN_OK        0
#define PIN_ERR      -1   /* generic failure (host answers 500 if nothing sent) */
#define PIN_ERR_DB   -2   /* database failure; the host answers by the SQLSTATE of the
                             failed statement: 503 outage, 422 class 22, 409 class 23 */

/* ---- log levels --------------------------------------------------------- */
enum pin_log_level { PIN_LOG_DEBUG = 0, PIN_LOG_INFO, PIN_LOG_WARN, PIN_LOG_ERROR };

/* ---- actors (bit set used by routes) ------------------------------------ */
#define PIN_ACTOR_AGENT        0x01u
#define PIN_ACTOR_CONSULTANT   0x02u
#define PIN_ACTOR_AGENCY_HEAD  0x04u
#define PIN_ACTOR_PIN_MANAGER  0x08u
#define PIN_ACTOR_INVESTOR     0x10u
#define PIN_ACTOR_ANY          0x1fu  /* any authenticated actor */
#define PIN_ACTOR_PUBLIC       0x00u  /* no token required (and none checked) */

/* The authenticated caller.  All strings borrowed, valid for the request. */
struct pin_principal {
	const char *sub;            /* user id (uuid text) */
	const char *tenant_id;      /* company id or NULL (investors, PIN managers) */
	const char *actor;          /* "agent", "consultant", ... */
	unsigned actor_bit;         /* one of PIN_ACTOR_* */
	const char *const *permissions;
	size_t n_permissions;
};

/* Opaque per-request handle; only valid inside a route handler. */
struct pin_req;

/* ---- handler types ------------------------------------------------------ */

/*
 * Route handler.  Must produce a response through api->respond_* and return
 * PIN_OK, or return PIN_ERR / PIN_ERR_DB without responding (the host then
 * answers 500 INTERNAL or 503 UNAVAILABLE).  An open transaction left by the
 * handler is rolled back by the host.
 */
typedef int (*pin_route_fn)(struct pin_req *req, void *ud);

/*
 * Job handler: one pass of a periodic job.  Takes its own transactions
 * (one per batch).  Returns the number of rows processed (>= 0) or a
 * negative PIN_ERR*.  The host counts <prefix>_<job>_processed_total and
 * _duration_ms from that.
 */
typedef int (*pin_job_fn)(void *ud);
/* One shard (k of n, 0 <= k < n) of a job pass (api->run_shards, 1.5):
 * rows processed (>= 0) or a negative PIN_ERR*. */
typedef int (*pin_shard_fn)(void *ud, int k, int n);

/* A consumed Kafka message.  All pointers borrowed, valid during the call. */
struct pin_msg {
	const char *topic;
	int32_t partition;
	int64_t offset;
	const char *key;            /* NUL-terminated copy of the key, or NULL */
	const char *value;          /* raw value, NUL-terminated */
	size_t value_len;
	json_object *envelope;      /* parsed value (the events.md envelope) */
	json_object *payload;       /* envelope.payload (object) */
	const char *message_id;     /* envelope.messageId */
	const char *event_type;     /* envelope.eventType */
	int contract_version;       /* envelope.contractVersion */
	int64_t created_at_us;      /* envelope.createdAt, microseconds since epoch */
};

enum pin_consume_status {
	PIN_CONSUME_OK = 0,         /* effects done in the host's transaction: commit + ack */
	PIN_CONSUME_RETRY = 1,      /* rollback; retry with backoff (partition paused) */
	PIN_CONSUME_FATAL = 2       /* rollback; send to <group>.dlq at once */
};

/* Filled by a consumer handler that returns RETRY or FATAL. */
struct pin_consume_result {
	char code[64];              /* stable error code, e.g. CAL_BOOKING_SYNC_INVALID_PAYLOAD */
	char detail[256];           /* no PII */
	int retry_deadline_s;       /* RETRY: DLQ after this many seconds (0 = host default) */
};

/*
 * Consumer handler.  Called inside a transaction the host opened, after it
 * inserted the inbox row (consumer group, messageId); a message whose inbox
 * row already exists is acknowledged without calling the handler.  The
 * handler runs its effects (and api->outbox_put) on api->db() WITHOUT
 * beginning or committing itself.
 */
typedef enum pin_consume_status (*pin_consumer_fn)(const struct pin_msg *msg,
		struct pin_consume_result *res, void *ud);

/* One message of api->outbox_put_many (1.4).  All pointers borrowed for the
 * call; the same meaning as the arguments of outbox_put.  May grow at its
 * end: the caller passes sizeof(struct pin_outbox_msg) as msg_size. */
struct pin_outbox_msg {
	const char *topic;
	const char *key;
	const char *event_type;
	const char *aggregate_type;     /* or NULL */
	const char *aggregate_id;       /* or NULL */
	json_object *payload;           /* borrowed (serialised, not kept) */
};
/*
 * 1.4 [consume]: set-based batch handler (optional; pin_consumer.batch_fn).
 * Called inside the host's batch transaction, after the inbox rows of the
 * batch were claimed, with the n (>= 1) NEW messages of the batch in the
 * order they were polled (duplicates, invalid envelopes and messages behind
 * a held one are not passed).  It applies their effects on api->db()
 * WITHOUT beginning or committing -- e.g. one multi-row upsert for all of
 * them -- and sets st[i] per message (preset to PIN_CONSUME_OK, res[i]
 * zeroed):
 *   PIN_CONSUME_OK     msgs[i]'s effects are done;
 *   PIN_CONSUME_FATAL  msgs[i] has NO effect in the transaction; it goes to
 *                      the DLQ with res[i] (its inbox row is removed), the
 *                      others commit;
 *   PIN_CONSUME_RETRY  not a verdict of its own: see below.
 * Return PIN_CONSUME_OK when the batch is done as st[] says.  Any other
 * return, a RETRY in st[], or a failed statement (the transaction is
 * aborted) makes the host roll the WHOLE batch back and apply the same
 * messages again through fn, one savepoint per message (retries, DLQ codes
 * and per-key order as for a consumer without batch_fn).  So the batch
 * handler may give up on anything it does not want to do set-based; fn must
 * be able to handle every message.  Effects of one key must keep the
 * messages' order (e.g. a multi-row upsert must not hold one key twice:
 * split the batch where a key repeats).  Process memory effects (metrics,
 * logs) of a batch that is rolled back are not undone.  Outbox rows
 * written here carry one trace id for the whole batch.
 */
typedef enum pin_consume_status (*pin_consumer_batch_fn)(
		const struct pin_msg *const *msgs, size_t n,
		enum pin_consume_status *st, struct pin_consume_result *res, void *ud);

/* ---- registration records (copied by the host; strings must be static) --- */

struct pin_route {
	const char *method;         /* "GET", "POST", "PATCH", "PUT", "DELETE" */
	const char *pattern;        /* "/api/v1/agent/calendar/events/{id}/start" */
	unsigned actors;            /* PIN_ACTOR_* set; PIN_ACTOR_PUBLIC = no auth */
	const char *permission;     /* required permission or NULL */
	int require_tenant;         /* non-zero: principal must carry tenant_id */
	pin_route_fn fn;
	void *ud;                   /* transfers: freed with ud_free at shutdown */
	void (*ud_free)(void *ud);
};

struct pin_job {
	const char *name;           /* "reminder-dispatch"; also the config key job.<name>.interval_ms */
	int interval_ms;            /* default interval between passes */
	pin_job_fn fn;
	void *ud;                   /* transfers */
	void (*ud_free)(void *ud);
};

struct pin_consumer {
	const char *group;          /* consumer group; DLQ topic is "<group>.dlq" */
	const char *const *topics;  /* NULL-terminated list */
	const char *inbox_table;    /* e.g. "calendar.inbox"; NULL = "calendar.inbox" */
	pin_consumer_fn fn;
	void *ud;                   /* transfers */
	void (*ud_free)(void *ud);
	/* -- 1.4 [consume]: read only from plugins built against >= 1.4 */
	pin_consumer_batch_fn batch_fn;  /* NULL: per-message path only */
	int batch_max;              /* > 0: at most this many messages per
	                               savepoint batch transaction (below the
	                               host's consumer_batch_max), e.g. 32 for a
	                               handler that takes 2 subtransactions per
	                               message; set batches (batch_fn) are capped
	                               by consumer_batch_set_max only */
	/* -- 1.8: read only from plugins built against >= 1.8 */
	const char *dlq_metric;     /* NULL, or a counter name (no labels),
	                               e.g. "notifications_dlq_total": + 1 for
	                               every message of this group the host
	                               writes to "<group>.dlq", whoever decided
	                               it (the host's pin_dlq_total{group} too) */
	const char *lag_metric;     /* NULL, or a gauge name (no labels), e.g.
	                               "notifications_consumer_lag_seconds":
	                               the age of the oldest message of this
	                               group not yet handled, in seconds, worked
	                               out when /metrics is scraped; 0 when
	                               caught up (doc/operating.md "Lag") */
	const char *version_metric; /* NULL, or a counter name (no labels),
	                               e.g. "calendar_crm_booking_sync_
	                               contract_mismatch_total": + 1 for every
	                               message of this group whose envelope's
	                               contractVersion is not 1 (handled anyway:
	                               warn-and-proceed), as pin_consumer_
	                               contract_version_mismatch_total{group} */
};

/*
 * The registrar, valid only during init.  Each function copies the record
 * and returns 0, or -1 (duplicate route/job/group, bad pattern) with a log
 * line; init should then fail.
 */
struct pin_registrar {
	size_t size;
	int (*route)(struct pin_registrar *reg, const struct pin_route *r);
	int (*job)(struct pin_registrar *reg, const struct pin_job *j);
	int (*consumer)(struct pin_registrar *reg, const struct pin_consumer *c);
	void *host_private;         /* do not touch */
	/* -- 1.1: declares an outbox table of the plugin's schema
	 *    ("<schema>.outbox", same columns as calendar.outbox, created by the
	 *    plugin's migration).  The relay of a worker host publishes every
	 *    registered outbox (each in id order); api->outbox_put_to accepts
	 *    only registered tables.  Registering one twice (two plugins of one
	 *    schema) is allowed.  0, or -1 for an invalid name ([a-z0-9_.]). */
	int (*outbox)(struct pin_registrar *reg, const char *table);
	/* -- 1.3: the route METHOD PATTERN (registered before, method GET) only
	 *    reads and tolerates data a few seconds old (at most the host's
	 *    read_max_lag_s).  When the host has pg_dsn_read, api->db() (and
	 *    db_exec*) of that route's requests is the thread's connection to
	 *    the hot standby; writes fail there (SQLSTATE 25006).  The host
	 *    falls back to the primary when the standby is down or lags.
	 *    Never mark a read-your-writes path (a caller's own lists right
	 *    after its POST).  0, or -1 (no such GET route) with a log line. */
	int (*route_replica_ok)(struct pin_registrar *reg, const char *method,
			const char *pattern);
};

/*
 * Host services.  Append-only; check PIN_API_HAS() for members newer than
 * the minor you were built against.
 */
struct pin_host_api {
	size_t size;
	int abi_major;
	int abi_minor;

	/* -- logging: one JSON line on stderr.  varargs are key, value string
	 *    pairs terminated by NULL.  Never pass PII.  Thread-safe. */
	void (*log)(int level, const char *msg, ...);

	/* -- clock: the host clock (shifted by --clock-offset-s when allowed).
	 *    The only "now" plugins use; pass it to SQL as a parameter. */
	int64_t (*now_us)(void);
	/* Formats an instant (us since epoch) as "2026-12-01T09:00:00.123456Z"
	 * into out (>= 40 bytes).  Returns out. */
	char *(*fmt_time)(int64_t us, char *out, size_t outlen);
	/* Parses ISO-8601 with offset ("...Z", "+03:00"); 0 ok, -1 invalid. */
	int (*parse_time)(const char *s, int64_t *us_out);

	/* -- ids: writes a UUIDv7 (36 chars + NUL) into out[37]. */
	void (*uuid_v7)(char out[37]);
	/* non-zero if s is a canonical uuid text */
	int (*is_uuid)(const char *s);

	/* -- config: value of key (file, PIN_* env, flags) or def.  Borrowed,
	 *    valid for the life of the host.  Since 1.7, for a key that the
	 *    host or a plugin declares (struct pin_config_key) the declared
	 *    default replaces def when the key is unset or empty; def is used
	 *    for keys declared without a default (def "" / NULL) and for
	 *    undeclared keys (logged once as a bug).  New code uses
	 *    config_str / config_num / config_bool (1.7). */
	const char *(*config_get)(const char *key, const char *def);
	long long (*config_int)(const char *key, long long def);

	/* -- arena of the current invocation (request / job pass / message). */
	void *(*alloc)(size_t n);                       /* zeroed; arena */
	char *(*strdup)(const char *s);                 /* arena */
	char *(*sprintf)(const char *fmt, ...)          /* arena */
		__attribute__((format(printf, 1, 2)));

	/* -- database: the calling thread's connection (never share it).
	 *    NULL when the database is unreachable (the host reconnects). */
	PGconn *(*db)(void);
	/* PQexecParams on db() with text params (NULL = SQL NULL).  The result
	 * belongs to the arena (do not PQclear).  Returns NULL only if there is no
	 * connection; check PQresultStatus otherwise.  Errors are logged. */
	PGresult *(*db_exec)(const char *sql, int nparams, const char *const *params);
	/* Same, prepared once per connection under name (use for hot queries). */
	PGresult *(*db_exec_prepared)(const char *name, const char *sql,
			int nparams, const char *const *params);
	int (*db_begin)(void);      /* 0 ok, PIN_ERR_DB */
	int (*db_commit)(void);     /* 0 ok, PIN_ERR_DB (then rolled back) */
	void (*db_rollback)(void);
	/* SQLSTATE of a failed result ("23505"...), "" when none.  Borrowed. */
	const char *(*db_sqlstate)(const PGresult *res);
	/* Name of the constraint a failed result violated, or "".  Borrowed. */
	const char *(*db_constraint)(const PGresult *res);

	/* -- transactional outbox: inserts one message into calendar.outbox in
	 *    the current transaction.  The host builds the events.md envelope
	 *    (messageId v7, createdAt = now, correlationId = trace id) around
	 *    payload.  All arguments borrowed (payload serialised, not kept).
	 *    0; PIN_ERR when topic, key, event_type or payload is NULL;
	 *    PIN_ERR_DB. */
	int (*outbox_put)(const char *topic, const char *key,
			const char *event_type, const char *aggregate_type,
			const char *aggregate_id, json_object *payload);

	/* -- request (route handlers only).  Strings borrowed for the request. */
	const char *(*req_method)(struct pin_req *r);
	const char *(*req_path)(struct pin_req *r);
	const char *(*req_param)(struct pin_req *r, const char *name);   /* path {param} */
	const char *(*req_query)(struct pin_req *r, const char *name);   /* decoded, or NULL */
	const char *(*req_header)(struct pin_req *r, const char *name);  /* "If-Match", ... */
	/* Parsed JSON body, or NULL when there is none.  Borrowed.  The host has
	 * already answered 400/413 for bodies that are not JSON or too big. */
	json_object *(*req_body)(struct pin_req *r);
	const struct pin_principal *(*req_principal)(struct pin_req *r); /* NULL on public routes */
	const char *(*req_trace_id)(struct pin_req *r);

	/* -- responses (exactly one per request).  body transfers to the host
	 *    (also when PIN_ERR: a second response is refused). */
	int (*respond_json)(struct pin_req *r, int status, json_object *body);
	/* name, value borrowed (copied).  PIN_ERR when 8 headers are set
	 * already, or name/value hold CR/LF (or name a ':'). */
	int (*set_header)(struct pin_req *r, const char *name, const char *value);
	/* problem+json with a stable code.  code, detail borrowed (copied);
	 * errors (array of {field, message}) may be NULL and transfers to
	 * the host. */
	int (*respond_problem)(struct pin_req *r, int status, const char *code,
			const char *detail, json_object *errors);

	/* -- metrics (Prometheus).  name like "pin_calendar_events_created_total";
	 *    labels NULL or 'k="v",k2="v2"'.  Thread-safe, copied. */
	void (*metric_add)(const char *name, const char *labels, double v);  /* counter */
	void (*metric_set)(const char *name, const char *labels, double v);  /* gauge */

	/* -- 1.1: outbox_put into a registered outbox table (reg->outbox),
	 *    e.g. "notifications.outbox"; NULL = calendar.outbox.  Same
	 *    envelope and returns as outbox_put; PIN_ERR also for a table that
	 *    no plugin registered. */
	int (*outbox_put_to)(const char *table, const char *topic, const char *key,
			const char *event_type, const char *aggregate_type,
			const char *aggregate_id, json_object *payload);

	/* -- 1.2: histogram observation in seconds (buckets 1 ms .. 60 s);
	 *    name without _bucket/_sum/_count, e.g.
	 *    "notifications_dispatch_duration_seconds".  1.8: a name ending
	 *    in "_ms" (a seed's name, "notifications_enqueue_duration_ms") is
	 *    observed in milliseconds, buckets 1 .. 60000.  Thread-safe, copied. */
	void (*metric_observe)(const char *name, const char *labels, double v);

	/* -- 1.4: outbox_put of n messages at once into table (NULL =
	 *    calendar.outbox; a registered one, as outbox_put_to), in the
	 *    current transaction and in ONE statement: all n rows or none.
	 *    Each message gets the envelope outbox_put builds (its own
	 *    messageId v7; createdAt = now, one value for the batch;
	 *    correlationId and traceparent of the invocation).  One INFO log
	 *    line per call (count, first/last messageId), not one per row.
	 *    msgs is an array of n records of msg_size bytes (pass
	 *    sizeof(struct pin_outbox_msg)).  0 (also for n == 0); PIN_ERR
	 *    when a message lacks topic, key, event_type or payload (nothing
	 *    written), for an unregistered table, or out of memory;
	 *    PIN_ERR_DB (roll the transaction back). */
	int (*outbox_put_many)(const char *table, const struct pin_outbox_msg *msgs,
			size_t n, size_t msg_size);

	/* -- 1.5: db_exec_prepared with the result in PostgreSQL's binary
	 *    format (PQfformat 1; the parameters stay text): uuid 16 bytes,
	 *    int2/int4/int8 in network order, bool one byte, text and varchar
	 *    their bytes, arrays as array_send writes them.  The backend skips
	 *    the columns' output functions.  Same ownership, NULL and error
	 *    rules as db_exec_prepared; a statement name is prepared once per
	 *    connection whatever the format of its results. */
	PGresult *(*db_exec_prepared_bin)(const char *name, const char *sql,
			int nparams, const char *const *params);

	/* -- 1.5: runs fn(ud, k, n) for k = 0 .. n-1 (1 <= n <= 16) at the same
	 *    time and returns when every one has returned.  k = 0 runs on the
	 *    calling thread (its connection and arena); every other k on a host
	 *    thread of its own, started for the call, with its own PostgreSQL
	 *    connection (api->db() and the db_* members inside fn are that
	 *    thread's; opened for the call, closed after it), its own arena
	 *    (freed when fn returns: return nothing in it) and the caller's
	 *    trace id (outbox correlationId; a traceparent of a child span).
	 *    For a job whose rows split into n disjoint shards, each taken in
	 *    transactions of its own, so that n backends work at once.  fn
	 *    must not leave a transaction open (the host rolls it back); the
	 *    caller must not be in one.  A shard whose thread cannot start runs
	 *    on the calling thread after k = 0.  ud is shared by the threads
	 *    (read only, or synchronised by fn).  Returns the sum of the
	 *    results when all are >= 0, else the first negative one (in k
	 *    order); PIN_ERR for n outside 1..16 or when the caller is in a
	 *    transaction. */
	int (*run_shards)(int n, pin_shard_fn fn, void *ud);

	/* -- 1.6: respond_json with a body that is JSON text already: text
	 *    (malloc'd, len bytes, not checked) becomes the host's, is sent as
	 *    it is (Content-Type application/json) and freed after the
	 *    response -- also when the call fails.  PIN_ERR for NULL text,
	 *    when the request has its response already, or out of memory. */
	int (*respond_json_text)(struct pin_req *r, int status, char *text, size_t len);

	/* -- 1.7: a declared key's value (flag, PIN_<KEY> environment, file,
	 *    else its declared default), checked against its type and bounds
	 *    before any plugin's init ran (a bad value refuses the start), so
	 *    the call site writes no default and handles no parse error.
	 *    config_str: borrowed for the life of the host; "" when unset (a
	 *    key declared without a default).  config_num: PIN_CFG_INT,
	 *    PIN_CFG_DURATION and PIN_CFG_OCTAL keys (and a BOOL as 0/1).
	 *    config_bool: PIN_CFG_BOOL keys (1 true, 0 false).  A key that
	 *    nobody declared is a bug: logged (ERROR, once per key), and ""
	 *    / 0 / 0 returned.  Thread-safe: configuration is read-only once
	 *    the host runs. */
	const char *(*config_str)(const char *key);
	long long (*config_num)(const char *key);
	int (*config_bool)(const char *key);

	/* -- 1.9: a response whose body is not JSON: content_type (borrowed,
	 *    copied; "text/html; charset=utf-8"), body (malloc'd, len bytes,
	 *    sent as it is) becomes the host's and is freed after the
	 *    response -- also when the call fails.  PIN_ERR for NULL body or
	 *    content type, a content type with CR/LF, when the request has
	 *    its response already, or out of memory. */
	int (*respond_body)(struct pin_req *r, int status, const char *content_type,
			char *body, size_t len);
};

/* ---- declared configuration (1.7) --------------------------------------- */

/* Types of a key.  A value is given as text (file line, environment
 * variable, flag) and checked at start; an empty value means "unset": the
 * declared default applies. */
enum pin_config_type {
	PIN_CFG_STRING = 1,  /* any text */
	PIN_CFG_INT,         /* base-10 integer in [min, max] */
	PIN_CFG_DURATION,    /* whole number of `unit` (ms, s, h, days) in [min, max] */
	PIN_CFG_BOOL,        /* true/false, yes/no, on/off, 1/0 (any case) */
	PIN_CFG_ENUM,        /* one of `values` ("loop|threads") */
	PIN_CFG_PATH,        /* a file or directory name */
	PIN_CFG_URL,         /* scheme://...; `values` lists the schemes ("http|https") */
	PIN_CFG_LIST,        /* comma-separated names */
	PIN_CFG_OCTAL,       /* a file mode, octal (0660), in [min, max] */
	PIN_CFG_DSN,         /* a libpq connection string (password redacted when printed) */
	PIN_CFG_ADDR         /* host:port, or unix:/path (when `values` says "unix") */
};

/* modes: the host modes a key applies to (keys of other modes are
 * accepted in a shared file and ignored) */
#define PIN_CFG_API      0x1u
#define PIN_CFG_WORKER   0x2u
#define PIN_CFG_MIGRATE  0x4u
#define PIN_CFG_ALL      0x7u

/* flags */
#define PIN_CFG_SECRET   0x1u  /* never printed: --print-config shows <redacted> */
#define PIN_CFG_RELOAD   0x2u  /* may change on a reload (read at each use or
                                  re-settable without restarting threads,
                                  connections or sockets); else restart-only */
#define PIN_CFG_BUILDDEF 0x4u  /* the default is a build's install path: the
                                  reference names it instead of printing it */

/*
 * One configuration key.  All strings static (the host copies them).
 * name: [a-z0-9_.-]+, unique across the host and every plugin (a plugin
 * cannot redeclare a host key; the host's own are in pin-host.conf(5)).
 * def: the default as a file would write it ("5000", "true", "range"), or
 * NULL / "": unset.  min, max: bounds of INT, DURATION and OCTAL values
 * (inclusive; min == max == 0: none).  values: ENUM values or URL schemes,
 * '|'-separated.  unit: DURATION's unit ("ms", "s", "h", "days"); for INT
 * a word for the reference ("rows") or NULL.  group: a section of the
 * reference ("delivery"), or NULL.  desc: one line, no trailing period.
 * A job's interval key job.<name>.interval_ms is declared by the plugin
 * that registers the job (PIN_CFG_JOB_INTERVAL), with the job's default.
 * Records may grow at their end: the array's stride is config_key_size.
 */
struct pin_config_key {
	const char *name;
	int type;                   /* enum pin_config_type */
	const char *def;
	unsigned modes;             /* PIN_CFG_API | PIN_CFG_WORKER | PIN_CFG_MIGRATE */
	unsigned flags;             /* PIN_CFG_SECRET | PIN_CFG_RELOAD | ... */
	long long min, max;
	const char *values;
	const char *unit;
	const char *group;
	const char *desc;
};

#define PIN_CFG_XSTR_(x) #x
#define PIN_CFG_XSTR(x) PIN_CFG_XSTR_(x)
/* The interval key of a job the plugin registers (job.<job>.interval_ms,
 * 10 ms .. 24 h, read by the host's scheduler); ms is the job's own
 * default: pass the macro (a plain integer) given to pin_job.interval_ms. */
#define PIN_CFG_JOB_INTERVAL(job, ms, group, description)                 \
	{ "job." job ".interval_ms", PIN_CFG_DURATION, PIN_CFG_XSTR(ms),  \
	  PIN_CFG_WORKER, PIN_CFG_RELOAD, 10, 86400000, NULL, "ms", (group), \
	  (description) }

/* ---- the descriptor ----------------------------------------------------- */

struct pin_plugin {
	int abi_major;              /* PIN_ABI_MAJOR the plugin was built with */
	int abi_minor;              /* PIN_ABI_MINOR the plugin was built with */
	size_t size;                /* sizeof(struct pin_plugin) */
	const char *name;           /* "calendar" */
	const char *version;        /* plugin version, e.g. PACKAGE_VERSION */
	/* Called once, on the main thread, before any request.  Register
	 * everything through reg.  api stays valid until fini returns.  Return 0,
	 * or -1 with a reason in err (the host logs it and exits non-zero). */
	int (*init)(const struct pin_host_api *api, struct pin_registrar *reg,
			char *err, size_t errlen);
	/* Called once at shutdown after every thread stopped.  May be NULL. */
	void (*fini)(void);
	/* -- 1.7: the configuration keys this plugin reads: config_key_size
	 *    (sizeof(struct pin_config_key)) bytes each, ending with a record
	 *    whose name is NULL; NULL: none.  Static.  Read from the
	 *    descriptor WITHOUT calling init, also from plugins in plugin_dir
	 *    that this host does not load, so that a shared pin-host.conf may
	 *    set the keys of API-only plugins on a worker host and
	 *    --check-config knows them all. */
	const struct pin_config_key *config_keys;
	size_t config_key_size;
};

/* Every plugin defines this, and nothing else is exported (default
 * visibility even when the plugin builds with -fvisibility=hidden). */
__attribute__((visibility("default")))
const struct pin_plugin *pin_plugin_desc(void);

/* Convenience for plugins: the descriptor with this header's version. */
#define PIN_PLUGIN_DEFINE(nm, ver, initfn, finifn)                        \
	const struct pin_plugin *pin_plugin_desc(void)                    \
	{                                                                 \
		static const struct pin_plugin d = {                      \
			PIN_ABI_MAJOR, PIN_ABI_MINOR,                     \
			sizeof(struct pin_plugin), (nm), (ver),           \
			(initfn), (finifn), NULL, 0 };                    \
		return &d;                                                \
	}
/* The same with the plugin's configuration keys (1.7): keys is a static
 * array of struct pin_config_key ending with { NULL }. */
#define PIN_PLUGIN_DEFINE_CONFIG(nm, ver, initfn, finifn, keys)           \
	const struct pin_plugin *pin_plugin_desc(void)                    \
	{                                                                 \
		static const struct pin_plugin d = {                      \
			PIN_ABI_MAJOR, PIN_ABI_MINOR,                     \
			sizeof(struct pin_plugin), (nm), (ver),           \
			(initfn), (finifn), (keys),                       \
			sizeof(struct pin_config_key) };                  \
		return &d;                                                \
	}

#ifdef __cplusplus
}
#endif
#endif /* PIN_PLUGIN_H */

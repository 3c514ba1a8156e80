/* sdk/consume.h -- helpers of Kafka consumers (the handler side of
 * struct pin_consumer). */
#ifndef PIN_SDK_CONSUME_H
#define PIN_SDK_CONSUME_H

#include "sdk/core.h"
#include "sdk/jtext.h"

/* Fills res->code and res->detail and returns st (RETRY or FATAL).  With
 * log_msg, also a WARN line: messageId, topic, code, detail (no PII); msg
 * is read only then (may be NULL without log_msg). */
enum pin_consume_status pc_consume_fail(const struct pin_msg *msg,
		struct pin_consume_result *res, enum pin_consume_status st,
		const char *code, const char *detail, const char *log_msg);
/* Kept for plugins built against earlier SDKs; no plugin of this tree calls
 * it.  The host checks the contract version of every consumed envelope
 * itself before the handler runs (warn-and-proceed, seeds 001, 002, 004):
 * pin_consumer_contract_version_mismatch_total{group} counts every message
 * of another version than 1 and a WARN line is written once per version and
 * group.  Calling this as well counts such a message a second time, in
 * metric{version="N"}, and writes log_msg (with messageId, topic and
 * contractVersion) once per (metric, version) and process.  metric must be
 * a static string (it is kept). */
void pc_contract_check(const struct pin_msg *msg, const char *log_msg,
		const char *metric);

/*
 * The head every reader of the identity contract (pin.identity.users.v1)
 * checks: an object payload with userId (uuid, not the nil uuid) and displayName (1..1000
 * bytes), borrowed from payload.  NULL when valid, else what is wrong.
 */
const char *pc_identity_user(json_object *payload, const char **user_id,
		const char **display_name);

/* [consume] Set-based batch handlers (pin_consumer.batch_fn, ABI 1.4)
 * split a batch into runs of distinct keys, each one multi-row statement
 * (json_to_recordset of pc_batch_run_json): a key that repeats starts a new
 * run, so one key's messages keep their order.  A run holds at most
 * PC_BATCH_RUN_MAX messages (a batch of consumer_batch_set_max's default,
 * 500, is one run).  Keys are found through a hash (case-insensitive):
 * linear time per run. */
#define PC_BATCH_RUN_MAX 512
#define PC_BATCH_RUN_SLOTS 1024     /* power of two, >= 2 x PC_BATCH_RUN_MAX */
struct pc_batch_run {
	struct pc_jt rows;          /* JSON text: the array of the rows made
	                             * (pc_batch_item_row), in run order */
	int closed;                 /* rows' ']' written (pc_batch_run_json) */
	const struct pin_msg *msg[PC_BATCH_RUN_MAX];
	const char *key[PC_BATCH_RUN_MAX];  /* borrowed (the messages') */
	void *data[PC_BATCH_RUN_MAX];       /* the parse's item->data */
	size_t idx[PC_BATCH_RUN_MAX];       /* pc_batch_runs: the batch index */
	unsigned short slot[PC_BATCH_RUN_SLOTS];    /* key index + 1; 0 free */
	size_t n;
	int alone;                  /* pc_batch_runs: a run of one message that
	                             * applies on its own (see below) */
	/* pc_batch_runs: the batch's verdicts and results (st[idx[j]] is the
	 * verdict of the run's message j; a flush may set it to FATAL, with
	 * res[idx[j]] filled: that message has no effect) */
	enum pin_consume_status *st;
	struct pin_consume_result *res;
	char now[40];               /* the host clock at init, formatted */
};
void pc_batch_run_init(struct pc_batch_run *r);
/* non-zero when a message of key cannot join the run (it holds key, any
 * case, already, or it is full): flush the run first */
int pc_batch_run_ends(const struct pc_batch_run *r, const char *key);
/* the index of the run's message of key (any case), or -1 */
long pc_batch_run_find(const struct pc_batch_run *r, const char *key);
/* the rows as JSON text (valid until the run is cleared), NULL after a
 * failed allocation (give the batch up) */
const char *pc_batch_run_json(struct pc_batch_run *r);
/* empties the run (after its statement); _free at the end */
void pc_batch_run_clear(struct pc_batch_run *r);
void pc_batch_run_free(struct pc_batch_run *r);
/* a string column of a row (NULL -> JSON null) */
void pc_batch_row_str(struct pc_jt *row, const char *col, const char *v);

/* FNV-1a of a key, case-folded (the hash of the runs and of pc_col_index) */
uint32_t pc_key_hash(const char *k);

/*
 * The rows of a libpq result by the text of one column, case-insensitive
 * (a uuid column against ids of payloads): pc_col_index_find is O(1), where
 * a scan of the result per lookup made a multi-row statement quadratic.
 * The index borrows res (keep it alive) and lives in the request arena.
 * A value in several rows: the first row.
 */
struct pc_col_index {
	const PGresult *res;
	int col;
	size_t mask;                /* slots - 1 */
	int *slot;                  /* row + 1; 0 free */
};
/* 0, or -1 when out of memory (give the batch up) */
int pc_col_index_init(struct pc_col_index *ix, const PGresult *res, int col);
/* the first row whose column equals v (any case), or -1 */
int pc_col_index_find(const struct pc_col_index *ix, const char *v);

/*
 * The driver of a run-based batch handler: msgs[0..n) in order, each
 * validated by parse, st[i] set, the runs cut where a key repeats (or a
 * run is full) and each handed to flush; returns the batch handler's
 * result (pin_consumer.batch_fn).
 *
 * parse(msg, res, item, ud), item zeroed but for msg: OK with item->key
 *   (borrowed from msg) and, as the plugin needs, item->data (kept in the
 *   run as run->data[j]; the plugin owns it, e.g. arena memory) and a row
 *   (pc_batch_item_row: an open JSON object written as text, with
 *   "last_event_at", msg's createdAt; the caller adds its columns, the
 *   driver closes it; a message that makes none has no row in run->rows); OK with item->alone set: the
 *   message applies on its own -- the run before it is flushed, then a run
 *   of just this message (run->alone = 1) goes to flush; FATAL (no effect:
 *   st[i]); RETRY: the batch gives up (the host takes the per-message path).
 * flush(run, res, ud): the run's statement(s); res is the result of the
 *   message that ended the run (msgs[0]'s for the last run).  It may set a
 *   run message's verdict to FATAL (struct pc_batch_run: st, res, idx).
 *   Anything but OK gives the batch up.  The driver empties the run
 *   afterwards.
 * After a give-up no further message is parsed or flushed.
 */
struct pc_batch_item {
	const struct pin_msg *msg;
	const char *key;
	int alone;
	void *data;
	struct pc_jt *row;          /* pc_batch_item_row; NULL: none */
	struct pc_jt *buf_;         /* the driver's writer of rows */
};
/* item's row, made on the first call (rows are text, not json-c objects:
 * no allocation per row) */
struct pc_jt *pc_batch_item_row(struct pc_batch_item *item);
typedef enum pin_consume_status (*pc_batch_parse_fn)(const struct pin_msg *msg,
		struct pin_consume_result *res, struct pc_batch_item *item, void *ud);
typedef enum pin_consume_status (*pc_batch_flush_fn)(struct pc_batch_run *run,
		struct pin_consume_result *res, void *ud);
enum pin_consume_status pc_batch_runs(const struct pin_msg *const *msgs, size_t n,
		enum pin_consume_status *st, struct pin_consume_result *res,
		pc_batch_parse_fn parse, pc_batch_flush_fn flush, void *ud);

#endif

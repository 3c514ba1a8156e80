/* sdk/replica.h -- the consumer skeleton of a replica of the identity
 * users (pin.identity.users.v1): one row per user in a table of the
 * registering plugin, newest message wins.  workers keeps
 * calendar.user_replicas with it, notify notifications.recipient_contacts;
 * each plugin says its table, its columns and what a message means, the
 * skeleton does the rest the same way for both:
 *
 *   - the per-message handler: parse, then one upsert of the row
 *     (INSERT .. ON CONFLICT (user_id) DO UPDATE .. WHERE the stored
 *     last_event_at is older than the envelope's createdAt);
 *   - the set-based batch handler (ABI 1.4 batch_fn): the batch's valid
 *     messages as runs of distinct users (pc_batch_runs), each run ONE
 *     upsert of json_to_recordset with the same newest-wins condition;
 *   - a message older than the row changes nothing and counts in the
 *     plugin's stale metric, as does any message for a row whose status is
 *     the plugin's final_status (a deleted user stays deleted); a message the plugin applies otherwise (its
 *     parse sets alone, e.g. an erasure) runs on its own in its place;
 *   - after a row is applied, the plugin's applied() sees its stored
 *     status (e.g. the departure cascade of an agent no longer Active).
 *
 * Both statements are made from the one column list at registration, so
 * the two paths cannot drift apart.  The table must have user_id uuid
 * (primary key), the text columns named, status, last_event_at and
 * updated_at timestamptz (and created_at timestamptz with has_created_at).
 */
#ifndef PIN_SDK_REPLICA_H
#define PIN_SDK_REPLICA_H

#include "sdk/core.h"

#define PC_REPLICA_COLS_MAX 8

/* One message's row: what parse fills. */
struct pc_replica_row {
	const char *user_id;        /* the key (a uuid), borrowed from the message */
	const char *v[PC_REPLICA_COLS_MAX];  /* the values of cols, in order;
	                                      * NULL: SQL NULL; borrowed */
	int alone;                  /* no upsert: the plugin's alone() applies the
	                             * message (in the batch, in its own run) */
};

struct pc_replica {
	const char *plugin;         /* the registering plugin ("workers") */
	const char *group;          /* consumer group (sdk/topics.h) */
	const char *inbox_table;    /* the plugin's consumer inbox */
	const char *table;          /* the plugin's replica table, schema-qualified */
	const char *cols[PC_REPLICA_COLS_MAX + 1];  /* its text columns besides
	                             * user_id and the instants, NULL-terminated;
	                             * "status" among them */
	int has_created_at;         /* the table has created_at (set on insert) */
	const char *stmt;           /* prepared statement name of the per-message
	                             * upsert; the batch's is "<stmt>_set" */
	const char *code_db;        /* RETRY code of a failed upsert */
	const char *what;           /* the per-message upsert in its RETRY detail:
	                             * "<what> failed (<SQLSTATE>)" */
	const char *stale_metric;   /* counter of messages older than their row
	                             * (or arriving after final_status) */
	const char *final_status;   /* a stored status no later message changes
	                             * (e.g. "Deleted": erased for good); it then
	                             * counts as stale.  NULL: none.  Letters only */
	const char *dlq_metric;     /* NULL or pin_consumer.dlq_metric (1.8) */
	/* The message's contract: OK with row filled; FATAL or RETRY with res
	 * filled (pc_consume_fail).  Called once per message on either path. */
	enum pin_consume_status (*parse)(const struct pin_msg *msg,
			struct pin_consume_result *res, struct pc_replica_row *row);
	/* A message parse marked alone, in the message's transaction.  NULL
	 * when parse never does. */
	enum pin_consume_status (*alone)(const struct pin_msg *msg,
			struct pin_consume_result *res, const struct pc_replica_row *row);
	/* The upsert applied msg: status is the row's stored status.  NULL:
	 * nothing to do.  Anything but OK: RETRY / FATAL of the message (on the
	 * batch path, the batch is given back to the host). */
	enum pin_consume_status (*applied)(const struct pin_msg *msg,
			struct pin_consume_result *res, const char *user_id,
			const char *status);
	/* filled by pc_replica_register */
	char sql_one_[1024], sql_set_[1024], stmt_set_[64];
	size_t ncols_;
};

/*
 * Registers the replica's consumer on pin.identity.users.v1 (during init).
 * rp must live as long as the plugin (static storage): the consumer's
 * handlers read it.  0, or PIN_ERR with a reason in err (a column list
 * that does not fit, or the host refused the consumer).
 */
int pc_replica_register(struct pin_registrar *reg, struct pc_replica *rp,
		char *err, size_t errlen);

#endif

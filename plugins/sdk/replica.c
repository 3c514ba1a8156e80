/* replica.c -- the consumer skeleton of an identity replica (sdk/replica.h). */
#include "config.h"
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "sdk/replica.h"
#include "sdk/consume.h"
#include "sdk/pg.h"
#include "sdk/reg.h"
#include "sdk/topics.h"

static const char *const topics[] = { PC_TOPIC_IDENTITY_USERS, NULL };

/* appends to buf (size cap, *len used); -1 once it does not fit */
static int put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len >= cap)
		return -1;
	va_start(ap, fmt);
	n = vsnprintf(buf + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= cap - *len) {
		*len = cap;
		return -1;
	}
	*len += (size_t)n;
	return 0;
}

/* "INSERT INTO t AS r (user_id, <cols>, last_event_at[, created_at],
 * updated_at) " -- the head both statements share */
static void put_head(const struct pc_replica *rp, char *buf, size_t cap, size_t *len)
{
	put(buf, cap, len, "INSERT INTO %s AS r (user_id", rp->table);
	for (size_t i = 0; i < rp->ncols_; i++)
		put(buf, cap, len, ", %s", rp->cols[i]);
	put(buf, cap, len, ", last_event_at%s, updated_at) ",
			rp->has_created_at ? ", created_at" : "");
}

/* the newest-wins update both statements share */
static void put_tail(const struct pc_replica *rp, char *buf, size_t cap, size_t *len)
{
	put(buf, cap, len, "ON CONFLICT (user_id) DO UPDATE SET ");
	for (size_t i = 0; i < rp->ncols_; i++)
		put(buf, cap, len, "%s = EXCLUDED.%s, ", rp->cols[i], rp->cols[i]);
	put(buf, cap, len, "last_event_at = EXCLUDED.last_event_at, "
			"updated_at = EXCLUDED.updated_at "
			"WHERE (r.last_event_at IS NULL OR r.last_event_at < EXCLUDED.last_event_at) ");
	if (rp->final_status)
		put(buf, cap, len, "AND r.status IS DISTINCT FROM '%s' ", rp->final_status);
	put(buf, cap, len, "RETURNING r.user_id, r.status");
}

/* Both statements from the column list.  0, or -1 when they do not fit. */
static int make_sql(struct pc_replica *rp)
{
	size_t n = 0, s = 0, cap = sizeof(rp->sql_one_);
	char *one = rp->sql_one_, *set = rp->sql_set_;

	/* per message: $1 user_id, $2.. the columns, then createdAt and now */
	put_head(rp, one, cap, &n);
	put(one, cap, &n, "VALUES ($1::uuid");
	for (size_t i = 0; i < rp->ncols_; i++)
		put(one, cap, &n, ", $%zu", i + 2);
	put(one, cap, &n, ", $%zu::timestamptz", rp->ncols_ + 2);
	if (rp->has_created_at)
		put(one, cap, &n, ", $%zu::timestamptz", rp->ncols_ + 3);
	put(one, cap, &n, ", $%zu::timestamptz) ", rp->ncols_ + 3);
	put_tail(rp, one, cap, &n);
	/* a run: $1 the rows (json), $2 now */
	put_head(rp, set, cap, &s);
	put(set, cap, &s, "SELECT x.user_id");
	for (size_t i = 0; i < rp->ncols_; i++)
		put(set, cap, &s, ", x.%s", rp->cols[i]);
	put(set, cap, &s, ", x.last_event_at%s, $2::timestamptz "
			"FROM json_to_recordset($1::json) AS x(user_id uuid",
			rp->has_created_at ? ", $2::timestamptz" : "");
	for (size_t i = 0; i < rp->ncols_; i++)
		put(set, cap, &s, ", %s text", rp->cols[i]);
	put(set, cap, &s, ", last_event_at timestamptz) ");
	put_tail(rp, set, cap, &s);
	if (n >= cap || s >= cap)
		return -1;
	return snprintf(rp->stmt_set_, sizeof(rp->stmt_set_), "%s_set", rp->stmt)
			< (int)sizeof(rp->stmt_set_) ? 0 : -1;
}

static enum pin_consume_status on_user(const struct pin_msg *msg,
		struct pin_consume_result *res, void *ud)
{
	const struct pc_replica *rp = ud;
	const char *p[PC_REPLICA_COLS_MAX + 3];
	struct pc_replica_row row = { 0 };
	enum pin_consume_status st;
	char created[40], now[40];
	PGresult *r;

	if ((st = rp->parse(msg, res, &row)) != PIN_CONSUME_OK)
		return st;
	if (row.alone)
		return rp->alone(msg, res, &row);
	pc_api->fmt_time(msg->created_at_us, created, sizeof(created));
	pc_api->fmt_time(pc_api->now_us(), now, sizeof(now));
	p[0] = row.user_id;
	for (size_t i = 0; i < rp->ncols_; i++)
		p[i + 1] = row.v[i];
	p[rp->ncols_ + 1] = created;
	p[rp->ncols_ + 2] = now;
	r = pc_api->db_exec_prepared(rp->stmt, rp->sql_one_, (int)rp->ncols_ + 3, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return pc_consume_fail(NULL, res, PIN_CONSUME_RETRY, rp->code_db,
				pc_api->sprintf("%s failed (%s)", rp->what,
					r ? pc_api->db_sqlstate(r) : "no connection"), NULL);
	if (PQntuples(r) == 0) {
		pc_api->metric_add(rp->stale_metric, NULL, 1);
		return PIN_CONSUME_OK;
	}
	return rp->applied ? rp->applied(msg, res, row.user_id, PQgetvalue(r, 0, 1)) :
		PIN_CONSUME_OK;
}

/* pc_batch_runs' flush: one upsert of the run, or the alone message */
static enum pin_consume_status run_flush(struct pc_batch_run *u,
		struct pin_consume_result *res, void *ud)
{
	const struct pc_replica *rp = ud;
	const char *p[2];
	PGresult *r;
	enum pin_consume_status st = PIN_CONSUME_OK;

	if (u->alone)
		return rp->alone(u->msg[0], res, u->data[0]);
	if (!(p[0] = pc_batch_run_json(u)))
		return PIN_CONSUME_RETRY;
	p[1] = u->now;
	r = pc_api->db_exec_prepared(rp->stmt_set_, rp->sql_set_, 2, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_CONSUME_RETRY;
	if ((size_t)PQntuples(r) < u->n)
		pc_api->metric_add(rp->stale_metric, NULL,
				(double)(u->n - (size_t)PQntuples(r)));
	for (int i = 0; rp->applied && i < PQntuples(r) && st == PIN_CONSUME_OK; i++) {
		long j = pc_batch_run_find(u, PQgetvalue(r, i, 0));

		if (j >= 0)
			st = rp->applied(u->msg[j], res, u->key[j], PQgetvalue(r, i, 1));
	}
	return st;
}

/* pc_batch_runs' parse: the row of the run keyed by the user, or an alone
 * message (its row kept in the arena for the flush) */
static enum pin_consume_status run_parse(const struct pin_msg *msg,
		struct pin_consume_result *res, struct pc_batch_item *it, void *ud)
{
	const struct pc_replica *rp = ud;
	struct pc_replica_row row = { 0 };
	enum pin_consume_status st;
	struct pc_jt *o;

	if ((st = rp->parse(msg, res, &row)) != PIN_CONSUME_OK)
		return st;
	it->key = row.user_id;
	if ((it->alone = row.alone)) {
		struct pc_replica_row *keep = pc_api->alloc(sizeof(*keep));

		if (!keep)
			return PIN_CONSUME_RETRY;
		*keep = row;
		it->data = keep;
		return PIN_CONSUME_OK;
	}
	o = pc_batch_item_row(it);
	pc_batch_row_str(o, "user_id", row.user_id);
	for (size_t i = 0; i < rp->ncols_; i++)
		pc_batch_row_str(o, rp->cols[i], row.v[i]);
	return PIN_CONSUME_OK;
}

static enum pin_consume_status on_users(const struct pin_msg *const *msgs, size_t n,
		enum pin_consume_status *st, struct pin_consume_result *res, void *ud)
{
	return pc_batch_runs(msgs, n, st, res, run_parse, run_flush, ud);
}

int pc_replica_register(struct pin_registrar *reg, struct pc_replica *rp,
		char *err, size_t errlen)
{
	struct pin_consumer c = { .group = rp->group, .topics = topics,
		.inbox_table = rp->inbox_table, .fn = on_user, .ud = rp,
		.batch_fn = on_users, .dlq_metric = rp->dlq_metric };

	for (rp->ncols_ = 0; rp->ncols_ <= PC_REPLICA_COLS_MAX && rp->cols[rp->ncols_];
			rp->ncols_++)
		;
	for (const char *f = rp->final_status; f && *f; f++)
		if (!isalpha((unsigned char)*f)) {
			snprintf(err, errlen, "%s: replica %s: final_status is not a word",
					rp->plugin, rp->table);
			return PIN_ERR;
		}
	if (rp->ncols_ > PC_REPLICA_COLS_MAX || make_sql(rp) < 0) {
		snprintf(err, errlen, "%s: replica %s: the column list is too long",
				rp->plugin, rp->table);
		return PIN_ERR;
	}
	return pc_register_consumer(reg, &c, rp->plugin, err, errlen);
}

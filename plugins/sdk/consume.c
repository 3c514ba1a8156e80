/* consume.c -- helpers of Kafka consumers. */
#include "config.h"
#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "sdk/consume.h"
#include "sdk/body.h"

enum pin_consume_status pc_consume_fail(const struct pin_msg *msg,
		struct pin_consume_result *res, enum pin_consume_status st,
		const char *code, const char *detail, const char *log_msg)
{
	snprintf(res->code, sizeof(res->code), "%s", code);
	snprintf(res->detail, sizeof(res->detail), "%s", detail);
	if (log_msg)
		pc_api->log(PIN_LOG_WARN, log_msg, "messageId", msg->message_id,
				"topic", msg->topic, "code", res->code, "detail", res->detail,
				NULL);
	return st;
}

/* (metric, version) pairs already warned about, for the life of the process */
#define CONTRACT_SEEN_MAX 64
static pthread_mutex_t contract_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	const char *metric;
	int version;
} contract_seen[CONTRACT_SEEN_MAX];
static size_t contract_nseen;

/* 1 when (metric, version) is new (and now remembered), else 0.  A full
 * table answers 1: a warning too many rather than a version unseen. */
static int contract_first(const char *metric, int version)
{
	size_t i;
	int first = 1;

	pthread_mutex_lock(&contract_mu);
	for (i = 0; i < contract_nseen; i++)
		if (contract_seen[i].version == version &&
		    !strcmp(contract_seen[i].metric, metric)) {
			first = 0;
			break;
		}
	if (first && contract_nseen < CONTRACT_SEEN_MAX) {
		contract_seen[contract_nseen].metric = metric;
		contract_seen[contract_nseen].version = version;
		contract_nseen++;
	}
	pthread_mutex_unlock(&contract_mu);
	return first;
}

void pc_contract_check(const struct pin_msg *msg, const char *log_msg,
		const char *metric)
{
	char v[16];

	if (msg->contract_version == 1)
		return;
	snprintf(v, sizeof(v), "%d", msg->contract_version);
	if (contract_first(metric, msg->contract_version))
		pc_api->log(PIN_LOG_WARN, log_msg, "messageId", msg->message_id,
				"topic", msg->topic, "contractVersion", v, NULL);
	pc_api->metric_add(metric, pc_api->sprintf("version=\"%s\"", v), 1);
}

const char *pc_identity_user(json_object *payload, const char **user_id,
		const char **display_name)
{
	if (!payload || !json_object_is_type(payload, json_type_object))
		return "payload is not an object";
	*user_id = pc_jstr(payload, "userId");
	if (!pc_id_ok(*user_id))
		return "userId is missing, not a uuid or the nil uuid";
	*display_name = pc_jstr(payload, "displayName");
	if (!*display_name || !**display_name || strlen(*display_name) > 1000)
		return "displayName is missing, empty or too long";
	return NULL;
}

void pc_batch_run_init(struct pc_batch_run *r)
{
	pc_jt_init(&r->rows, 64 * 1024);
	pc_jt_arr(&r->rows);
	r->closed = 0;
	r->n = 0;
	r->alone = 0;
	r->st = NULL;
	r->res = NULL;
	memset(r->slot, 0, sizeof(r->slot));
	pc_api->fmt_time(pc_api->now_us(), r->now, sizeof(r->now));
}

uint32_t pc_key_hash(const char *k)
{
	uint32_t h = 2166136261u;

	for (; *k; k++) {
		h ^= (unsigned char)tolower((unsigned char)*k);
		h *= 16777619u;
	}
	return h;
}

static size_t key_slot(const char *k)
{
	return pc_key_hash(k) & (PC_BATCH_RUN_SLOTS - 1);
}

long pc_batch_run_find(const struct pc_batch_run *r, const char *key)
{
	for (size_t s = key_slot(key); r->slot[s]; s = (s + 1) & (PC_BATCH_RUN_SLOTS - 1))
		if (!strcasecmp(r->key[r->slot[s] - 1], key))
			return (long)r->slot[s] - 1;
	return -1;
}

int pc_batch_run_ends(const struct pc_batch_run *r, const char *key)
{
	return r->n == PC_BATCH_RUN_MAX || pc_batch_run_find(r, key) >= 0;
}

int pc_col_index_init(struct pc_col_index *ix, const PGresult *res, int col)
{
	int n = PQntuples(res);
	size_t slots = 16;

	while (slots < 2 * (size_t)n)
		slots *= 2;
	ix->res = res;
	ix->col = col;
	ix->mask = slots - 1;
	ix->slot = pc_api->alloc(slots * sizeof(*ix->slot));
	if (!ix->slot)
		return -1;
	memset(ix->slot, 0, slots * sizeof(*ix->slot));
	for (int k = 0; k < n; k++) {
		const char *v = PQgetvalue(res, k, col);
		size_t s;

		if (pc_col_index_find(ix, v) >= 0)
			continue;       /* the first row of a value stays */
		for (s = pc_key_hash(v) & ix->mask; ix->slot[s]; s = (s + 1) & ix->mask)
			;
		ix->slot[s] = k + 1;
	}
	return 0;
}

int pc_col_index_find(const struct pc_col_index *ix, const char *v)
{
	for (size_t s = pc_key_hash(v) & ix->mask; ix->slot[s]; s = (s + 1) & ix->mask)
		if (!strcasecmp(PQgetvalue(ix->res, ix->slot[s] - 1, ix->col), v))
			return ix->slot[s] - 1;
	return -1;
}

struct pc_jt *pc_batch_item_row(struct pc_batch_item *it)
{
	if (!it->row) {
		it->row = it->buf_;
		pc_jt_reset(it->row);
		pc_jt_obj(it->row);
		PC_JT_KV(it->row, "last_event_at", pc_jt_time(it->row, it->msg->created_at_us));
	}
	return it->row;
}

/* appends the item (its row, if any, owned by the run from now on) as
 * message i of the batch */
static void run_append(struct pc_batch_run *r, const struct pc_batch_item *it, size_t i)
{
	size_t s = key_slot(it->key);

	if (it->row) {
		pc_jt_end_obj(it->row);
		if (it->row->failed)    /* no half row: pc_batch_run_json says NULL */
			r->rows.failed = 1;
		else
			pc_jt_raw(&r->rows, it->row->buf, it->row->len);
	}
	while (r->slot[s])      /* a key twice: both stay findable (the first) */
		s = (s + 1) & (PC_BATCH_RUN_SLOTS - 1);
	r->slot[s] = (unsigned short)(r->n + 1);
	r->msg[r->n] = it->msg;
	r->data[r->n] = it->data;
	r->idx[r->n] = i;
	r->key[r->n++] = it->key;
}

const char *pc_batch_run_json(struct pc_batch_run *r)
{
	if (!r->closed) {
		pc_jt_end_arr(&r->rows);
		r->closed = 1;
	}
	if (r->rows.failed || !r->rows.buf)
		return NULL;
	r->rows.buf[r->rows.len] = '\0';
	return r->rows.buf;
}

void pc_batch_run_clear(struct pc_batch_run *r)
{
	pc_jt_reset(&r->rows);
	pc_jt_arr(&r->rows);
	r->closed = 0;
	r->n = 0;
	r->alone = 0;
	memset(r->slot, 0, sizeof(r->slot));
}

void pc_batch_run_free(struct pc_batch_run *r)
{
	pc_jt_free(&r->rows);
	r->n = 0;
}

void pc_batch_row_str(struct pc_jt *row, const char *col, const char *v)
{
	pc_jt_key(row, col);
	pc_jt_str(row, v);
}

/* flush of a non-empty run, then emptied */
static enum pin_consume_status run_flush(struct pc_batch_run *r,
		struct pin_consume_result *res, pc_batch_flush_fn flush, void *ud)
{
	enum pin_consume_status st;

	if (!r->n)
		return PIN_CONSUME_OK;
	st = flush(r, res, ud);
	pc_batch_run_clear(r);
	return st;
}

enum pin_consume_status pc_batch_runs(const struct pin_msg *const *msgs, size_t n,
		enum pin_consume_status *st, struct pin_consume_result *res,
		pc_batch_parse_fn parse, pc_batch_flush_fn flush, void *ud)
{
	struct pc_batch_run u;
	struct pc_jt row;           /* one message's row, copied into the run */
	enum pin_consume_status rc = PIN_CONSUME_OK;

	pc_jt_init(&row, 1024);
	pc_batch_run_init(&u);
	u.st = st;
	u.res = res;
	for (size_t i = 0; i < n && rc == PIN_CONSUME_OK; i++) {
		struct pc_batch_item it = { .msg = msgs[i], .buf_ = &row };

		st[i] = parse(msgs[i], &res[i], &it, ud);
		if (st[i] == PIN_CONSUME_RETRY)
			rc = PIN_CONSUME_RETRY;
		if (st[i] != PIN_CONSUME_OK)
			continue;
		if (it.alone || pc_batch_run_ends(&u, it.key))
			rc = run_flush(&u, &res[i], flush, ud);
		run_append(&u, &it, i);
		if (it.alone) {
			u.alone = 1;
			if (rc == PIN_CONSUME_OK)
				rc = run_flush(&u, &res[i], flush, ud);
			else
				pc_batch_run_clear(&u);
		}
	}
	if (rc == PIN_CONSUME_OK)
		rc = run_flush(&u, &res[0], flush, ud);
	pc_batch_run_free(&u);
	pc_jt_free(&row);
	return rc;
}

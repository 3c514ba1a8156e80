/* consumer.h -- what the files of the Kafka consumer share
 * (consumer_group.c: threads, the group, the poll loop; consumer_batch.c:
 * batches; consumer_msg.c: one message; consumer_lag.c: the real lag;
 * consumer.c: a consumer's partitions and offsets).  Private to
 * host/worker: worker.h is the worker side's face. */
#ifndef PIN_CONSUMER_H
#define PIN_CONSUMER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <librdkafka/rdkafka.h>

#include "worker.h"

/* a partition paused on a held message */
struct held {
	rd_kafka_message_t *m;
	int attempts;
	int backoff_ms;
	int64_t next_us;            /* next attempt (host clock) */
	int64_t deadline_us;        /* 0: none yet (infrastructure retries only) */
	char code[64];
	char detail[256];
};

/* contract versions other than 1 remembered per consumer for the
 * once-per-version warning (cons_note_version) */
#define CONS_CV_SEEN_MAX 64

struct cons {
	pthread_t thr;
	const struct pin_consumer_entry *e;
	size_t sp_max;              /* [consume] most messages of a savepoint batch */
	rd_kafka_t *rk;
	rd_kafka_t *dlq;
	char *boot;                 /* bootstrap the consumer was built with */
	char dlq_topic[256];
	char inbox_sql[512];
	char claim_sql[512];        /* the inbox rows of a batch, one statement */
	char unclaim_sql[512];      /* the rows of its failed / skipped messages */
	unsigned rebal;             /* rebalance callbacks so far */
	char labels[300];
	struct held *held;
	size_t nheld, capheld;
	bool started;
	bool create_failing;        /* log creation failures once */
	int cv_seen[CONS_CV_SEEN_MAX];  /* contract versions != 1 warned about */
	size_t ncv_seen;
	bool commit_async;          /* [ident] consumer_commit_async */
	int64_t next_lag_us;        /* next lag sample */
	struct lagp {               /* per partition: when lag > 0 began to stall */
		char topic[200];
		int32_t part;
		int64_t committed;
		int64_t since_us;
	} *lagp;
	size_t nlagp;
	/* high watermarks asked by the lag sampler thread (own handle, see
	 * wm_main): the consumer thread never waits on a broker for them */
	pthread_t wm_thr;
	bool wm_started;
	pthread_mutex_t wm_mu;
	struct wmp {
		char topic[200];
		int32_t part;
		int64_t hi;             /* -1: not asked yet */
	} *wm;
	size_t nwm;
	int wm_new;                 /* a partition was registered: ask now */
	unsigned wm_gen;            /* bumped when the broker moved (wm_forget) */
	/* per partition the highest offset asked to commit, .err set while its
	 * last commit failed (commit_retry); dropped on revoke */
	rd_kafka_topic_partition_list_t *commits;
	int64_t next_commit_retry_us;
	char dl_table[160];         /* <schema>.dead_letters (dead_letters.c) */
	int64_t next_pending_us;    /* next count of pin_dlq_pending */
	/* the seed's lag (pin_consumer.lag_metric, 1.8), read by the scrape
	 * (cons_lag_collect) from another thread, so atomics:
	 * pend_ts_us  the Kafka timestamp (us) of the oldest message polled
	 *             and not yet handled (the batch in hand, held ones), 0
	 *             after a poll found nothing new;
	 * stall_us    while a partition's committed offset stayed put across
	 *             two lag samples with lag > 0: when it was first seen so
	 *             (the oldest such partition), else 0 */
	int64_t pend_ts_us;
	int64_t stall_us;
	/* the last sample's pin_consumer_oldest_unprocessed_age_seconds as the
	 * instant it counts from (0: none), so a scrape between samples, or
	 * while the consumer thread is stuck, sees it grow */
	int64_t age_from_us;
};

/* outcome of one attempt at a message */
enum attempt { A_DONE, A_RETRY, A_RETRY_INFRA, A_DLQ };

/* what one attempt at a message decided, for handle() and the DLQ headers */
struct verdict {
	char code[64];
	char detail[256];
	char mid[37];
	int deadline_s;             /* handler RETRY: its own deadline, or 0 */
};

/* consumer.c: a consumer's partitions and offsets */
extern volatile int cons_stop_flag;     /* pin_consumers_stop sets it */
bool cons_stopping(void);
/* op 0 pause, 1 resume, 2 seek to offset */
void cons_part_list_op(struct cons *c, const char *topic, int32_t part,
		int64_t offset, int op);
struct held *cons_held_find(struct cons *c, const char *topic, int32_t part);
void cons_held_remove(struct cons *c, struct held *h);
/* Drops every held message (rebalance, shutdown); resumes if asked. */
void cons_held_drop_all(struct cons *c, bool resume);
/* pin_consumer_partitions_assigned{group} after a rebalance */
void cons_assigned_gauge(struct cons *c, rd_kafka_t *rk);
/* the first error of a commit's result, NO_ERROR if none */
rd_kafka_resp_err_t cons_commit_error(rd_kafka_resp_err_t err,
		const rd_kafka_topic_partition_list_t *offs);
void cons_commit_failed(struct cons *c, const rd_kafka_topic_partition_list_t *offs,
		rd_kafka_resp_err_t err);
void cons_commit_offsets(struct cons *c, const rd_kafka_topic_partition_list_t *offs);
/* the marked partitions still assigned: their highest offset again */
void cons_commit_retry(struct cons *c);
/* revoked partitions: no longer ours to commit */
void cons_commits_revoke(struct cons *c, const rd_kafka_topic_partition_list_t *parts);

/* consumer_msg.c: one message */
int cons_dlq_send(struct cons *c, const rd_kafka_message_t *m,
		const char *code, const char *detail);
void cons_dlq_destroy(struct cons *c);
/* "consumer: skipped-duplicate" (INFO): group, topic, messageId, eventType */
void cons_log_duplicate(struct cons *c, const struct pin_msg *msg);
void cons_log_failure(struct cons *c, const rd_kafka_message_t *m,
		const char *message_id, const char *what, const char *code,
		const char *detail);
void cons_msg_init(struct pin_msg *msg, const rd_kafka_message_t *m);
const char *cons_header_traceparent(const rd_kafka_message_t *m);
void cons_msg_trace(const struct pin_msg *msg, const char *tp);
void cons_note_version(struct cons *c, const struct pin_msg *msg);
void cons_note_envelope(struct cons *c, const struct pin_msg *msg,
		const char *tp);
/* the decision alone (unit-tested): status, database link up, SQLSTATE */
enum attempt cons_classify_state(enum pin_consume_status st, bool db_up,
		const char *state);
enum attempt cons_classify(enum pin_consume_status st,
		const struct pin_consume_result *res, struct verdict *v);
void cons_hold(struct cons *c, rd_kafka_message_t *m, struct held *h,
		enum attempt a, const struct verdict *v, int64_t now);
void cons_handle(struct cons *c, rd_kafka_message_t *m, struct held *h);

/* dead_letters.c: the record of the dead letters, pin_dlq_pending */
void cons_dead_letters_init(struct cons *c, const char *inbox);
/* the row of m (before the DLQ produce); 0, -1 (retried like an outage) */
int cons_dead_letter_record(struct cons *c, const rd_kafka_message_t *m,
		const char *code, const char *detail);
/* pin_dlq_pending{group}, every 5 s or now */
void cons_dead_letters_sample(struct cons *c, bool now);

/* consumer_batch.c: batches */
/* one message of a batch */
struct bitem {
	rd_kafka_message_t *m;
	struct pin_msg msg;
	json_object *env;
	struct verdict v;
	enum attempt a;
	const char *what;           /* log line of a DLQ */
	bool valid;                 /* envelope ok */
	bool fresh;                 /* its inbox row is new (this batch) */
	bool skip;                  /* dropped: its partition holds an earlier one */
	bool dup, processed, unclaim;
	bool held;                  /* cons_hold() took m */
};

void cons_handle_batch(struct cons *c, struct bitem *b, size_t n);
size_t cons_batch_keep_assigned(struct cons *c, struct bitem *b, size_t n);

/* consumer_lag.c: the real lag */
void cons_lag_forget(struct cons *c, const rd_kafka_topic_partition_list_t *parts);
/* the messages in hand (m[0..n), and the held ones) for the seed's lag */
void cons_lag_pending(struct cons *c, rd_kafka_message_t *const *m, size_t n);
/* at scrape time: the seed's lag gauges of consumers cs[0..n), and each
 * group's pin_consumer_oldest_unprocessed_age_seconds brought up to date */
void cons_lag_collect(struct cons *cs, size_t n);
void cons_lag_sample(struct cons *c);
void *cons_wm_main(void *arg);
void cons_wm_forget(struct cons *c);

#endif

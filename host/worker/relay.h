/* relay.h -- what the files of the outbox relay share (relay_run.c: the
 * threads and their loop; relay_batch.c: read and mark; relay_lead.c: the
 * leadership of the shards; relay_produce.c: the producer; relay_metrics.c:
 * gauges, textfile, time split; relay.c: what they all read).  Private to
 * host/worker: worker.h is the worker side's face. */
#ifndef PIN_RELAY_H
#define PIN_RELAY_H

#include <stdbool.h>
#include <stdint.h>
#include <librdkafka/rdkafka.h>

#include "worker.h"

/* advisory lock classes (two-int4 form): the member lock of every relay
 * host (second key: relay_shards); a unit's class is derived from its
 * outbox name (hashtext('pin.relay:' || outbox) & 0x7fffffff) */
#define RELAY_MEMBER_CLASS "730153"
/* the want lock (same form, second key relay_shards): held by every relay
 * thread of a host with relay_cursor on, whichever way it relays now; a
 * marking member without it is a host that marks by choice or by release */
#define RELAY_WANT_CLASS "730154"
#define RELAY_MAX_INFLIGHT 16

/* delivery state of one row in a batch */
enum dr_state { DR_PENDING = 0, DR_OK, DR_FAILED, DR_PARKED };

struct relay_batch;

struct relay_row {
	const char *id;
	const char *topic;
	size_t size;
	int attempts;               /* before this batch */
	enum dr_state st;
	rd_kafka_resp_err_t err;
	const char *reason;         /* DR_PARKED: metric label */
	const char *traceparent;    /* NULL when the writer had none */
	const char *message_id;
	const char *xid;            /* cursor units: the row's xid8 (ordering) */
	struct relay_batch *b;
};

/* rows read together and handed to the producer; owns its arena (the
 * PGresult the producer points into) */
struct relay_batch {
	struct pin_arena *a;
	struct relay_row *rows;
	PGresult *res;              /* key and value of each row */
	int n;                      /* rows read */
	int produced;               /* rows looked at by the producer */
	int pending;                /* delivery reports still due */
	int64_t deadline_us;
	int64_t produced_us;        /* monotonic: produce done, last report */
	int64_t reported_us;
};

/* one (outbox, shard) */
struct relay_unit {
	const char *table;
	int shard;
	char lab[200];              /* outbox="..",shard="K" */
	bool led;
	bool releasing;             /* give the lock back once drained */
	bool stalled;               /* a batch failed: drain, then start over */
	bool caught_up;             /* the last read was not full */
	char cursor[24];            /* last id read (see unit_reap: rewinds) */
	/* relay_cursor (cursor units, relay_batch.c "The commit-ordered
	 * cursor"): the (xid, id) read up to, and the one every row before has
	 * been delivered up to -- what calendar.outbox_cursor holds, written
	 * before the next read when it changed */
	bool cur;
	bool cur_hold;              /* a row of the window failed: no move */
	char rx[24], rid[24];
	char dx[24], did[24];
	char wx[24], wid[24];       /* the position last written to the table */
	int64_t rewound_us;         /* monotonic: the cursor last went to 0 */
	struct relay_batch *win[RELAY_MAX_INFLIGHT];
	int nwin;
};

/*
 * Where a relay thread's wall time goes, summed per window and logged at
 * debug level ("outbox relay: time split", doc/performance.md "The relay: sharded, pipelined, its own commit rule"):
 * the leadership round, the batch reads, handing rows to the producer,
 * the marks (their UPDATE, then the published log lines), the pending
 * gauge, polling for delivery reports and sleeping; and per batch the
 * time from its produce to its last delivery report and from that report
 * to its mark.
 */
enum rc_step { RC_LEAD, RC_READ, RC_PRODUCE, RC_MARK, RC_LOG, RC_PENDING, RC_POLL,
	RC_SLEEP, RC_N };

struct relay_clock {
	int64_t us[RC_N];
	int64_t since;              /* window start */
	int64_t report_us, wait_us; /* produce -> last report, report -> mark */
	long rows, batches, rewinds;
};

/* relay_metrics.c: the time split of the calling relay thread (NULL: none) */
extern _Thread_local struct relay_clock *relay_rclk;
/* adds the time since *t0 to step k and moves *t0 on */
void relay_rc_add(enum rc_step k, int64_t *t0);

struct relay {
	rd_kafka_t *rk;
	char *boot;                 /* bootstrap the producer was built with */
	int consecutive_failures;
	int backoff_ms;
	int64_t pause_until_us;     /* no new reads before (backoff) */
	bool failing;               /* for "log once per state change" */
	bool create_failing;        /* same, for producer creation */
	bool mismatch;              /* relays nothing: another relay_shards, or cursors and relay_cursor off */
	bool once;                  /* --once: no member lock, no balancing */
	bool cursor;                /* relays by the cursor now */
	bool want_cursor;           /* relay_cursor: by the cursor once every member can */
	bool switching;             /* giving its shards back to relay by the cursor */
	int64_t clear_since_us;     /* monotonic: since when no member marks by choice (0: one does) */
	bool cursor_warned;         /* an outbox without the xid column, logged */
	int kafka_up;               /* -1 unknown */
	int conn_pid;               /* backend pid of the session set up */
	int nshards, batch, inflight;
	int64_t rewind_us;          /* relay_rewind_ms; 0 = at every empty window */
	int64_t next_lead_us;       /* next leadership round */
	int64_t next_pending_us;    /* next pending-gauge refresh */
	int members;
	struct relay_unit *units;
	int nunits;
	int any_led;                /* -1 unknown */
	long long done;             /* rows published or parked */
	int thread;                 /* 0 .. relay_threads - 1 */
	int64_t next_boot_check;
};

/* relay.c: what every part reads */
#define RELAY_MAX_THREADS 8
extern bool relay_running;            /* threads started (not --once) */
extern struct pin_waiter relay_w;     /* set up by start */
extern _Atomic int relay_led_units;  /* over this host's relay threads */
size_t relay_noutboxes(void);
const char *relay_outbox(size_t i);
bool relay_should_stop(void);
/* Interruptible sleep: returns early when the relay is stopped. */
void relay_sleep_ms(int ms);
int relay_threads(void);              /* relay_threads, 1 .. RELAY_MAX_THREADS */
int64_t relay_failover_ms(void);

/* relay_lead.c: the leadership of the shards */
void relay_units_build(struct relay *r);
void relay_leader_gauge(struct relay *r);
void relay_lose_all(struct relay *r, const char *reason);
/* Gives a unit's lock back (its batches are marked). */
void relay_unit_release(struct relay *r, struct relay_unit *u, const char *reason);
/* the relay threads of every worker host, by their member and want locks */
struct relay_members {
	int marking;                /* members with our relay_shards, marking */
	int cursor;                 /* with our relay_shards, by the cursor */
	int by_choice;              /* marking members whose session holds no want lock */
	int foreign;                /* members with another relay_shards */
	bool cursors;               /* calendar.outbox_cursor has rows: a cursor era */
};
int relay_count_members(struct relay *r, struct relay_members *m);
void relay_lead_round(struct relay *r);

/* the member lock's second key: relay_shards, + RELAY_CURSOR_BIT while the
 * thread relays by the cursor (relay_lead.c "Marking or the cursor") */
#define RELAY_CURSOR_BIT 65536
int relay_member_key(const struct relay *r);

/* relay_batch.c: read and mark */
/* Loads (or starts) the unit's cursor when it becomes the shard's leader;
 * a unit whose outbox has no xid column relays by marking.  -1: failed. */
int relay_cursor_load(struct relay *r, struct relay_unit *u);
/* 1: the outbox has the xid column of migration 0780, 0: not, -1: failed */
int relay_outbox_has_xid(const char *table);
/* Writes the unit's delivered position when it moved (before each read, and
 * giving a shard back).  -1: failed. */
int relay_cursor_save(struct relay *r, struct relay_unit *u);
void relay_batch_free(struct relay_batch *b);
int relay_unit_reap(struct relay *r, struct relay_unit *u, int *done);
int relay_unit_feed(struct relay *r, struct relay_unit *u, int *nrows);

/* relay_produce.c: the producer and its delivery reports */
void relay_set_kafka_up(struct relay *r, int up);
void relay_producer_destroy(struct relay *r);
int relay_producer_create(struct relay *r);
bool relay_bootstrap_changed(struct relay *r);
bool relay_bootstrap_known(void);
const char *relay_park_reason(rd_kafka_resp_err_t e, int attempts);
void relay_batch_produce(struct relay *r, struct relay_batch *b);
void relay_on_failure(struct relay *r);
int relay_inflight(struct relay *r);
void relay_poll(struct relay *r, int wait_ms);

/* relay_metrics.c */
void relay_gauges_init(void);
void relay_update_pending(struct relay *r);
void relay_write_metrics_file(void);
void relay_clock_log(const struct relay *r, struct relay_clock *c, int64_t now);

#endif

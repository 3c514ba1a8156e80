/* slots.h -- slots.so: availability batches, agent slot management, the
 * public showcase.  Prefix slot_. */
#ifndef SLOT_SLOTS_H
#define SLOT_SLOTS_H

#include <stdint.h>
#include <stddef.h>
#include "pin/plugin.h"

/* ---- limits of domain.md (SlotBatch) ------------------------------------ */
#define SLOT_MAX_WINDOWS        14
#define SLOT_MAX_RANGE_DAYS     92      /* ToDate - FromDate < 92 */
#define SLOT_MAX_AHEAD_DAYS     183     /* ToDate <= today + 183 */
#define SLOT_DURATION_MIN       15
#define SLOT_DURATION_MAX       480
#define SLOT_GAP_MAX            240
#define SLOT_CUTOFF_MAX         10080
#define SLOT_CUTOFF_DEFAULT     120
#define SLOT_LOCATION_MAX       500
#define SLOT_BATCH_MAX          500     /* slots created per batch */
#define SLOT_LEAD_MIN           60      /* minimum lead time, minutes */
#define SLOT_LIST_RANGE_DAYS    92
#define SLOT_LIST_LIMIT_DEFAULT 100
#define SLOT_LIST_LIMIT_MAX     500

/* ============================================ pure rules (batch_rules.c, unit-tested) */

/* "HH:MM" -> minutes since midnight.  00:00..23:59; "24:00" only when
 * allow_24 (a window's end).  0 ok, -1 malformed. */
int slot_parse_hhmm(const char *s, int allow_24, int *minutes);

/* "YYYY-MM-DD" (a real calendar date) -> days since 1970-01-01.
 * 0 ok, -1 malformed. */
int slot_parse_date(const char *s, long *days);

/* Inverse of slot_parse_date into buf (>= 11 bytes); returns buf. */
char *slot_format_date(long days, char *buf, size_t len);

/* Date range rules: from <= to, to - from < 92, from >= today,
 * to <= today + 183.  NULL when fine, else a message; *field names the
 * offending field ("fromDate" / "toDate"). */
const char *slot_rule_dates(long from, long to, long today, const char **field);

/* A window: from < to (minutes).  NULL or a message. */
const char *slot_rule_window(int from_min, int to_min);

/* Number of slots a window gives one day (local arithmetic):
 * start = from + k * (duration + gap), start + duration <= to. */
int slot_rule_per_window(int from_min, int to_min, int duration, int gap);

/* =========================================== time off rules (timeoff_rules.c, unit-tested) */
#define SLOT_TIME_OFF_MAX_DAYS   366    /* to - from */
#define SLOT_TIME_OFF_AHEAD_DAYS 731    /* from <= now + 731 days */
#define SLOT_TIME_OFF_NOTE_MAX   500

/* An absence [from, to) (epoch us) at now: to > from, at most 366 days,
 * from at most 731 days ahead, and when creating, to in the future.  NULL
 * when fine, else a message; *field names the field ("from" / "to"). */
const char *slot_rule_time_off(int64_t from, int64_t to, int64_t now, int creating,
		const char **field);

/* 1 when the new span [new_from, new_to) reaches outside the old one: its
 * effects (archive, decline) then run again; a span that only shrank has
 * none (issue 32: shortening resurrects nothing and archives nothing). */
int slot_time_off_widens(int64_t old_from, int64_t old_to, int64_t new_from, int64_t new_to);

/* ============================================================ slots.c */
/* The host table is pc_api (sdk/core.h, set by pc_init in init). */

/* Column list of a slot row (agent representation), see slot_fields. */
#define SLOT_COLS \
	"s.id, s.batch_id, s.owner_user_id, s.tenant_id, s.kind, s.status, " \
	"calendar.us(s.start_at) AS start_us, calendar.us(s.end_at) AS end_us, " \
	"s.time_zone, s.auto_confirm, s.cancellation_cutoff_minutes, s.project_id, " \
	"s.property_object_id, s.location, s.version, s.archive_reason"
/* The slot representation of api.md (agent area) of a SLOT_COLS row, by
 * column names (sdk/colmap.h).  New object, NULL when the result lacks a
 * column. */
json_object *slot_json(const PGresult *res, int row);
/* A keyset page of SLOT_COLS rows (read with LIMIT limit + 1; cursor
 * start_us, id) as {items, nextCursor}.  New object, NULL as slot_json. */
json_object *slot_page_json(const PGresult *res, long long limit);

struct pc_errs;
/*
 * Reads from / to / limit / cursor of a list query (manage.c).  Defaults:
 * from = def_from, to = from + 92 days; to - from must be in (0, 92 days].
 * cur_id[0] == 0 when there is no cursor.  Errors already collected in e
 * (e.g. other query parameters) are answered with them.
 * 0 ok; PC_E_RESPONDED after answering 400 MALFORMED_REQUEST / 422.
 */
int slot_list_params(struct pin_req *r, int64_t def_from, int64_t *from, int64_t *to,
		long long *limit, int64_t *cur_us, char cur_id[37], struct pc_errs *e);

struct pc_idem;
/*
 * Opens the transaction of a write handler and runs the Idempotency-Key
 * check (sdk/idem.h).  0: inside the transaction, *in_tx = 1, go on;
 * PC_E_RESPONDED: already answered (a replay, or a key reused with another
 * request), rolled back, the handler returns PIN_OK; < 0 (PIN_ERR_DB): rolled
 * back, the handler returns it.
 */
int slot_tx_begin(struct pin_req *r, struct pc_idem *idem, int *in_tx);

/*
 * Ends a write handler that opened its transaction with slot_tx_begin:
 * stores the response under the Idempotency-Key, commits (*in_tx = 0), sets
 * ETag: "etag_version" when etag_version is not NULL, and answers status
 * with *body.  Ownership of *body passes to the host once it is answered
 * (*body = NULL); on an error before that the caller still owns it and
 * still rolls back when *in_tx.  0 ok, PIN_ERR_DB.
 */
int slot_tx_commit_respond(struct pin_req *r, const struct pc_idem *idem, int *in_tx,
		int status, json_object **body, const char *etag_version);

/* Route handlers. */
int slot_h_publish(struct pin_req *r, void *ud);        /* batch.c */
int slot_h_preview(struct pin_req *r, void *ud);        /* batch.c */
int slot_h_list(struct pin_req *r, void *ud);           /* manage.c */
int slot_h_pinmgr_list(struct pin_req *r, void *ud);    /* manage.c */
int slot_h_archive(struct pin_req *r, void *ud);        /* manage.c */
int slot_h_archive_batch(struct pin_req *r, void *ud);  /* manage.c */
int slot_h_showcase(struct pin_req *r, void *ud);       /* showcase.c */
int slot_h_time_off_create(struct pin_req *r, void *ud);        /* timeoff.c */
int slot_h_time_off_list(struct pin_req *r, void *ud);          /* timeoff.c */
int slot_h_time_off_get(struct pin_req *r, void *ud);           /* timeoff.c */
int slot_h_time_off_patch(struct pin_req *r, void *ud);         /* timeoff.c */
int slot_h_time_off_delete(struct pin_req *r, void *ud);        /* timeoff.c */

#endif

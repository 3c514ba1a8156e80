/* workers.h -- the parts of workers.so; each file registers its jobs/consumers. */
#ifndef WRK_WORKERS_H
#define WRK_WORKERS_H
#include "pin/plugin.h"

extern const struct pin_host_api *wrk_api;

/* Each returns 0 or -1 (with a reason in err). Called from workers.c init. */
int wrk_reminders_register(struct pin_registrar *reg, char *err, size_t errlen);  /* reminders.c */
int wrk_slots_register(struct pin_registrar *reg, char *err, size_t errlen);      /* slot_jobs.c */
int wrk_identity_register(struct pin_registrar *reg, char *err, size_t errlen);   /* identity.c */
int wrk_appointments_register(struct pin_registrar *reg, char *err, size_t errlen); /* appointments.c */
int wrk_crm_booking_register(struct pin_registrar *reg, char *err, size_t errlen); /* crm_booking.c */
int wrk_crm_deal_register(struct pin_registrar *reg, char *err, size_t errlen);    /* crm_deal.c */
int wrk_housekeeping_register(struct pin_registrar *reg, char *err, size_t errlen); /* housekeeping.c */

/* crm_booking.c: a CRM deadline event -> action ("complete" / "cancel")
 * while it is open; terminal events are left alone.  0 / PIN_ERR_DB. */
int wrk_crm_event_close(const char *event_id, const char *action, const char *reason,
		int64_t now_us);

/* ---------------------------------------------- consumer helpers (workers.c) */

/* String member of o, or NULL (absent, null or not a string).  Borrowed
 * from o. */
const char *wrk_jstr(json_object *o, const char *key);
/* Optional uuid member: absent or null -> 0 with *out = NULL; a uuid string
 * -> 0 with *out (borrowed from o); anything else -> -1. */
int wrk_opt_uuid(json_object *o, const char *key, const char **out);
/* Fills res->code and res->detail and returns st (RETRY or FATAL).  With
 * log_msg, also a WARN line: messageId, topic, code, detail (no PII). */
enum pin_consume_status wrk_consume_fail(const struct pin_msg *msg,
		struct pin_consume_result *res, enum pin_consume_status st,
		const char *code, const char *detail, const char *log_msg);
/* A message of another contract version than 1 is handled anyway, with a
 * WARN line (log_msg) and the counter metric. */
void wrk_contract_check(const struct pin_msg *msg, const char *log_msg,
		const char *metric);

/* ------------------------------------------- batch jobs (workers.c) */

/* One batch of a job in its own transaction (FOR UPDATE SKIP LOCKED):
 * rows processed (>= 0) or a negative PIN_ERR*. */
typedef int (*wrk_batch_fn)(int64_t now_us, int batch);
/* The config value key (e.g. "job.reminder-dispatch.batch"); def when it
 * is outside [1, 10000]. */
int wrk_batch_size(const char *key, int def);
/* One job pass: fn(now_us, batch) until a batch comes back short or after
 * max_batches (the next pass continues).  The total, or the first negative
 * result of fn. */
int wrk_batch_loop(wrk_batch_fn fn, int64_t now_us, int batch, int max_batches);
/* Gauge metric{labels} = age in seconds of the oldest due row at now_us, 0
 * when none.  sql (prepared as stmt) takes $1 = now (timestamptz) and
 * selects calendar.us(min(<due column>)) of the due rows. */
void wrk_set_lag(const char *stmt, const char *sql, int64_t now_us,
		const char *metric, const char *labels);

#endif

/* workers.h -- the parts of workers.so.  workers.c is the entry and only
 * registers; each part registers its own jobs / consumers.  Shared helpers
 * live in the SDK (sdk/consume.h, sdk/batchjob.h) and the domain library
 * (caldomain/), never in workers.c. */
#ifndef WRK_WORKERS_H
#define WRK_WORKERS_H
#include "pin/plugin.h"

/* The keys workers.so reads (keys.c) and its jobs' default intervals. */
extern const struct pin_config_key wrk_config_keys[];
/* 10 s, not the spec's general 60 s: a reminder leaves up to one cycle after
 * its DueAt (seed 000: "~1 cycle" is the normal accuracy), and seed 001 gives
 * reminders a source SLA under a minute end to end, which a 60 s cycle
 * spends alone (issue 31: the burst's pass came 24-58 s after DUE).  A
 * quiet pass is one indexed statement. */
#define WRK_REMINDERS_INTERVAL_MS 10000
#define WRK_APT_EXPIRY_INTERVAL_MS 60000
#define WRK_SLOTS_INTERVAL_MS 60000
#define WRK_HOUSEKEEPING_INTERVAL_MS 600000

/* Each returns 0 or PIN_ERR (with a reason in err). Called from workers.c init. */
int wrk_reminders_register(struct pin_registrar *reg, char *err, size_t errlen);  /* reminders.c */
int wrk_slots_register(struct pin_registrar *reg, char *err, size_t errlen);      /* slot_jobs.c */
int wrk_identity_register(struct pin_registrar *reg, char *err, size_t errlen);   /* identity.c */
int wrk_appointments_register(struct pin_registrar *reg, char *err, size_t errlen); /* apt_expiry.c */
int wrk_crm_booking_register(struct pin_registrar *reg, char *err, size_t errlen); /* crm_booking.c */
int wrk_crm_deal_register(struct pin_registrar *reg, char *err, size_t errlen);    /* crm_deal.c */
int wrk_housekeeping_register(struct pin_registrar *reg, char *err, size_t errlen); /* housekeeping.c */

#endif

/* apt_expiry.c -- the appointment-timeout job (workers.md): Pending
 * appointments whose ConfirmDeadlineAt <= now -> Expired, CancelledBy =
 * System, with the full cascade (slot released or archived, event cancelled,
 * reminders skipped) and appointment-cancelled Reason = Expired.
 * Batches of job.appointment-timeout.batch (default 500) taken with FOR
 * UPDATE SKIP LOCKED, one transaction per batch; idempotent by state.
 * The cascade is cd_apt_expire_batch of the domain library (caldomain/appointment.h). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include "sdk/sdk.h"
#include "caldomain/event.h"
#include "workers.h"
#include "caldomain/appointment.h"

#define JOB_NAME "appointment-timeout"
#define LABELS "job=\"appointment-timeout\""
#define MAX_BATCHES 100     /* per pass; the next pass continues */

/* Age in seconds of the oldest due Pending appointment (0 when none). */
static void set_lag(int64_t now_us)
{
	pc_set_lag("wrk_apt_timeout_lag",
		"SELECT calendar.us(min(confirm_deadline_at)) FROM calendar.appointments "
		"WHERE status = 'Pending' AND confirm_deadline_at <= $1::timestamptz",
		now_us, "pin_job_lag_seconds", LABELS);
}

static int expire_batch(int64_t now_us, int batch)
{
	int n = cd_apt_expire_batch(now_us, batch);

	if (n > 0)
		pc_api->log(PIN_LOG_INFO, "appointments expired", "job", JOB_NAME,
				"count", pc_api->sprintf("%d", n), NULL);
	return n;
}

static int appointment_timeout(void *ud)
{
	int64_t now_us = pc_api->now_us();
	int total;

	(void)ud;
	set_lag(now_us);
	total = pc_batch_loop(expire_batch, now_us,
			pc_batch_size("job.appointment-timeout.batch"), MAX_BATCHES);
	if (total < 0)
		return total;
	if (total > 0)
		pc_api->metric_add("pin_calendar_appointments_expired_total", NULL, total);
	set_lag(now_us);
	return total;
}

int wrk_appointments_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_job j = { JOB_NAME, WRK_APT_EXPIRY_INTERVAL_MS, appointment_timeout, NULL, NULL };

	return pc_register_job(reg, &j, "workers", err, errlen);
}

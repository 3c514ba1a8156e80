/* sdk/instant.h -- instants as API text and SQL parameters; IANA zones. */
#ifndef PIN_SDK_INSTANT_H
#define PIN_SDK_INSTANT_H

#include "sdk/core.h"
#include "sdk/civil.h"

/*
 * The supported range of instants (issue 9 item 3): from
 * 1900-01-01T00:00:00Z up to, not including, 10000-01-01T00:00:00Z, i.e.
 * exactly what the host's parse_time accepts, so every instant the service
 * stores or publishes parses back.  A write whose DERIVED instant (end =
 * start + duration, a reminder's DueAt, a deadline, a slot's end) leaves the
 * range answers 422 VALIDATION_FAILED (PC_E_RANGE from the domain library);
 * a consumer refuses such a message as an invalid payload (DLQ).
 */
#define PC_INSTANT_MIN_US (-2208988800LL * 1000000)     /* 1900-01-01T00:00:00Z */
#define PC_INSTANT_END_US (253402300800LL * 1000000)    /* 10000-01-01T00:00:00Z */
#define PC_INSTANT_RANGE_MSG "a derived instant leaves the supported range " \
	"1900-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999Z"
/* 1 when us is in the supported range, else 0.  Pure (inline: usable by the
 * pure rule files without the host). */
static inline int pc_instant_ok(int64_t us)
{
	return us >= PC_INSTANT_MIN_US && us < PC_INSTANT_END_US;
}

/* Instant -> "2026-12-01T09:00:00Z" (fraction only when non-zero, 6 digits).
 * Arena. */
char *pc_time_str(int64_t us);
/* Pure variant into a caller buffer (>= 40 bytes); returns buf. */
char *pc_time_fmt(int64_t us, char *buf, size_t len);
/* Instant -> SQL timestamptz parameter text (always 6 fraction digits, Z).
 * Arena; NULL when out of memory. */
char *pc_time_param(int64_t us);
/* The text of pc_time_fmt into out (>= 40 bytes) without gmtime, strftime or
 * snprintf for years 1000..9999 (a civil-from-days conversion; those
 * functions for the rest); returns the length.  Pure. */
size_t pc_instant_fmt(int64_t us, char *out);
/* Its parts: us as days since 1970-01-01, the second of the day and the
 * microseconds of the second (floor); "YYYY-MM-DD" of a day into o (10
 * bytes, no NUL; -1 when the year has not 4 digits); "THH:MM:SS[.ffffff]Z"
 * into o, returning the end (no NUL). */
int64_t pc_us_split(int64_t us, unsigned *sod, int64_t *frac);
int pc_date_fmt(int64_t days, char *o);
char *pc_tod_fmt(char *o, unsigned sod, int64_t frac);
/* Adds an instant column (epoch us, see calendar.us() and pc_col_us of
 * sdk/pg.h) as API text, or null. */
void pc_json_col_time(json_object *o, const char *key, const PGresult *res, int row, int col);

/*
 * Looks name up case-insensitively in pg_timezone_names (cached per process
 * after the first call; posix/ and right/ duplicates are ignored).  0 with
 * *canonical (process lifetime, never free) when found, PC_E_TZ when
 * unknown, PIN_ERR_DB / PIN_ERR when the list could not be loaded.
 */
int pc_tz_lookup(const char *name, const char **canonical);

#endif

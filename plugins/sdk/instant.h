/* sdk/instant.h -- instants as API text and SQL parameters; IANA zones. */
#ifndef PIN_SDK_INSTANT_H
#define PIN_SDK_INSTANT_H

#include "sdk/core.h"

/* Instant -> "2026-12-01T09:00:00Z" (fraction only when non-zero, 6 digits).
 * Arena. */
char *pc_time_str(int64_t us);
/* Pure variant into a caller buffer (>= 40 bytes); returns buf. */
char *pc_time_fmt(int64_t us, char *buf, size_t len);
/* Instant -> SQL timestamptz parameter text (always 6 fraction digits, Z). */
char *pc_time_param(int64_t us);
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

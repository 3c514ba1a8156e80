/* sdk/civil.h -- calendar dates as day numbers: pure, inline, no other
 * header of the SDK (sdk/pg.c, sdk/instant.c and the slots' pure rules use
 * it). */
#ifndef PIN_SDK_CIVIL_H
#define PIN_SDK_CIVIL_H

#include <stdint.h>

/* Howard Hinnant's civil-date algorithms ("chrono-Compatible Low-Level Date
 * Algorithms"), proleptic Gregorian as gmtime: the days since 1970-01-01 of
 * y-m-d, and back. */
static inline int64_t pc_days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static inline void pc_civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d)
{
	int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;

	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

#endif

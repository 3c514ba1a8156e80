/* timeoff_rules.c -- pure rules of an agent's absence (issue 32 item 4): no
 * host, no database (tests/unit/test_slots_rules.c).  Which slots and
 * appointments an absence touches is the SQL's half-open overlap
 * (tstzrange(..) && tstzrange(..) in timeoff.c, calendar.slot_plan and the
 * booking check): a slot that only touches the absence is left alone. */
#include "config.h"
#include "slots.h"

#define DAY_US (86400LL * 1000000)

const char *slot_rule_time_off(int64_t from, int64_t to, int64_t now, int creating,
		const char **field)
{
	*field = "to";
	if (to <= from)
		return "must be after from";
	if (to - from > SLOT_TIME_OFF_MAX_DAYS * DAY_US)
		return "an absence is at most 366 days long";
	if (creating && to <= now)
		return "must be in the future: an absence that is over changes nothing";
	*field = "from";
	if (from > now + SLOT_TIME_OFF_AHEAD_DAYS * DAY_US)
		return "must be at most 731 days from now";
	return NULL;
}

int slot_time_off_widens(int64_t old_from, int64_t old_to, int64_t new_from, int64_t new_to)
{
	return new_from < old_from || new_to > old_to;
}

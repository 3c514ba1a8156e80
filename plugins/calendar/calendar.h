/* calendar.h -- calendar.so: the agent's work calendar (events + reminders)
 * and the read-only team views. */
#ifndef CAL_CALENDAR_H
#define CAL_CALENDAR_H
#include "pin/plugin.h"
#include "sdk/sdk.h"
#include "caldomain/event.h"

/* events_api.c -- agent area */
int cal_events_list(struct pin_req *r, void *ud);
int cal_events_get(struct pin_req *r, void *ud);
int cal_events_create(struct pin_req *r, void *ud);
int cal_events_patch(struct pin_req *r, void *ud);
/* reschedule, start, complete, cancel; ud: the action ("start") */
int cal_events_action(struct pin_req *r, void *ud);

/* team_api.c -- agency and PIN manager areas */
int cal_team_events(struct pin_req *r, void *ud);
int cal_pinmgr_events(struct pin_req *r, void *ud);

/* feed.c -- the agent's iCalendar feed (issue 32): the token's create /
 * rotate (POST), state (GET), revoke (DELETE); the public feed by token */
int cal_feed_token_create(struct pin_req *r, void *ud);
int cal_feed_token_get(struct pin_req *r, void *ud);
int cal_feed_token_delete(struct pin_req *r, void *ud);
int cal_feed_get(struct pin_req *r, void *ud);

/*
 * Shared range listing (team_api.c): events overlapping [from, to) of a
 * tenant, optionally restricted to one owner or to a uuid[] literal of
 * owners, paged by (startAt, id).  with_owner adds owner {userId,
 * displayName, avatarUrl} from calendar.user_replicas.  Answers the request.
 */
struct cal_list_scope {
	const char *tenant_id;
	const char *owner_user_id;      /* or NULL */
	const char *owner_ids_array;    /* "{...}" or NULL */
	int with_owner;
};
int cal_list_events(struct pin_req *r, const struct cal_list_scope *scope,
		struct pc_errs *e);

#define CAL_MAX_RANGE_US (92LL * 24 * 3600 * 1000000)

#endif

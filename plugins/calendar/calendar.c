/* calendar.c -- calendar.so: registers the agent events routes and the
 * read-only agency / PIN manager views. */
#include "config.h"
#include "calendar.h"
#include "caldomain/schema.h"

#define AGENT (PIN_ACTOR_AGENT | PIN_ACTOR_CONSULTANT)
#define EV "/api/v1/agent/calendar/events"
/* the team views: every actor but investors (who have no tenant) */
#define TEAM (PIN_ACTOR_ANY & ~PIN_ACTOR_INVESTOR)

static const struct pin_route cal_routes[] = {
	{ "GET", EV, AGENT, "calendar.events.view", 1, cal_events_list, NULL, NULL },
	{ "POST", EV, AGENT, "calendar.events.manage", 1, cal_events_create, NULL, NULL },
	{ "GET", EV "/{id}", AGENT, "calendar.events.view", 1, cal_events_get, NULL, NULL },
	{ "PATCH", EV "/{id}", AGENT, "calendar.events.manage", 1, cal_events_patch, NULL, NULL },
	{ "POST", EV "/{id}/reschedule", AGENT, "calendar.events.manage", 1,
		cal_events_action, "reschedule", NULL },
	{ "POST", EV "/{id}/start", AGENT, "calendar.events.manage", 1,
		cal_events_action, "start", NULL },
	{ "POST", EV "/{id}/complete", AGENT, "calendar.events.manage", 1,
		cal_events_action, "complete", NULL },
	{ "POST", EV "/{id}/cancel", AGENT, "calendar.events.manage", 1,
		cal_events_action, "cancel", NULL },
	{ "GET", "/api/v1/agency/calendar/events", TEAM, "calendar.team.view", 1,
		cal_team_events, NULL, NULL },
	{ "GET", "/api/v1/pin-manager/calendar/events", PIN_ACTOR_PIN_MANAGER,
		"calendar.team.view", 0, cal_pinmgr_events, NULL, NULL },
};

static int cal_init(const struct pin_host_api *api, struct pin_registrar *reg,
		char *err, size_t errlen)
{
	pc_init(api);
	if (pc_idem_table(CD_IDEM_TABLE, err, errlen) < 0)
		return PIN_ERR;
	return pc_register_routes(reg, cal_routes, sizeof(cal_routes) / sizeof(cal_routes[0]),
			"calendar", err, errlen);
}

PIN_PLUGIN_DEFINE("calendar", PACKAGE_VERSION, cal_init, NULL)

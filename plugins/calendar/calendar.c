/* calendar.c -- calendar.so: registers the agent events routes, the
 * read-only agency / PIN manager views and the agent's iCalendar feed. */
#include "config.h"
#include "calendar.h"
#include "caldomain/schema.h"

#define AGENT (PIN_ACTOR_AGENT | PIN_ACTOR_CONSULTANT)
#define EV "/api/v1/agent/calendar/events"
#define FT "/api/v1/agent/calendar/feed-token"
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
	/* the agent's iCalendar feed (issue 32; feed.c): the token by the API,
	 * the feed itself public (the token in the path is the credential) */
	{ "POST", FT, AGENT, "calendar.events.view", 1, cal_feed_token_create, NULL, NULL },
	{ "GET", FT, AGENT, "calendar.events.view", 1, cal_feed_token_get, NULL, NULL },
	{ "DELETE", FT, AGENT, "calendar.events.view", 1, cal_feed_token_delete, NULL, NULL },
	{ "GET", "/calendar/feeds/{file}", PIN_ACTOR_PUBLIC, NULL, 0, cal_feed_get, NULL, NULL },
};

static const struct pin_config_key cal_config_keys[] = {
	{ "calendar.feed_base_url", PIN_CFG_URL, "", PIN_CFG_API, PIN_CFG_RELOAD, 0, 0,
	  "http|https", NULL, "feed",
	  "public origin of the agents' iCalendar feed URLs, e.g. "
	  "https://calendar.example.com (nginx routes /calendar/feeds/ to the API hosts); "
	  "empty: http:// and the Host header of the request that creates the token" },
	{ NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL, NULL }
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

PIN_PLUGIN_DEFINE_CONFIG("calendar", PACKAGE_VERSION, cal_init, NULL, cal_config_keys)

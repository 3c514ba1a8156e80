/* appointments.c -- appointments.so: its routes, configuration and
 * registration (the handlers in book.c, decide.c, list.c, manage.c; their
 * shared error mapping and write skeleton in write.c). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "http.h"
#include "caldomain/schema.h"

/* ---------------------------------------------------------------- routes */

#define AGENT (PIN_ACTOR_AGENT | PIN_ACTOR_CONSULTANT)
#define INV PIN_ACTOR_INVESTOR
/* the team view: every actor but investors (who have no tenant) */
#define TEAM (PIN_ACTOR_ANY & ~PIN_ACTOR_INVESTOR)
#define AG "/api/v1/agent/calendar/appointments"
#define IN "/api/v1/investor/calendar/appointments"
#define VIEW "calendar.appointments.view"
#define DECIDE "calendar.appointments.decide"

static const struct pin_route routes[] = {
	{ "POST", "/api/public/calendar/appointments", INV, NULL, 0, apt_h_book, NULL, NULL },

	{ "GET", AG, AGENT, VIEW, 1, apt_h_agent_list, NULL, NULL },
	{ "GET", AG "/{appointmentId}", AGENT, VIEW, 1, apt_h_agent_get, NULL, NULL },
	{ "POST", AG "/{appointmentId}/confirm", AGENT, DECIDE, 1, apt_h_agent_confirm, NULL, NULL },
	{ "POST", AG "/{appointmentId}/decline", AGENT, DECIDE, 1, apt_h_agent_decline, NULL, NULL },
	{ "POST", AG "/{appointmentId}/cancel", AGENT, DECIDE, 1, apt_h_agent_cancel, NULL, NULL },
	{ "POST", AG "/{appointmentId}/complete", AGENT, DECIDE, 1, apt_h_agent_complete,
		NULL, NULL },

	{ "GET", IN, INV, NULL, 0, apt_h_investor_list, NULL, NULL },
	{ "GET", IN "/{appointmentId}", INV, NULL, 0, apt_h_investor_get, NULL, NULL },
	{ "POST", IN "/{appointmentId}/cancel", INV, NULL, 0, apt_h_investor_cancel, NULL, NULL },
	{ "POST", IN "/{appointmentId}/reschedule", INV, NULL, 0, apt_h_investor_reschedule,
		NULL, NULL },

	{ "GET", "/api/v1/agency/calendar/appointments", TEAM, "calendar.team.view", 1,
		apt_h_agency_list, NULL, NULL },
	{ "GET", "/api/v1/pin-manager/calendar/appointments", PIN_ACTOR_PIN_MANAGER,
		"calendar.team.view", 0, apt_h_pinmgr_list, NULL, NULL },

	/* the investors' manage links (manage.c, issue 32 item 3): public,
	 * the signed token in the path is the credential */
	{ "GET", "/manage/{token}", PIN_ACTOR_PUBLIC, NULL, 0, apt_h_manage_get, NULL, NULL },
	{ "POST", "/manage/{token}", PIN_ACTOR_PUBLIC, NULL, 0, apt_h_manage_post, NULL, NULL },
};

static int apt_init(const struct pin_host_api *api, struct pin_registrar *reg,
		char *err, size_t errlen)
{
	pc_init(api);
	if (pc_idem_table(CD_IDEM_TABLE, err, errlen) < 0)
		return PIN_ERR;
	if (!PIN_API_HAS(api, respond_body)) {
		snprintf(err, errlen, "the host is older than ABI 1.9 (respond_body)");
		return PIN_ERR;
	}
	if (apt_manage_init(err, errlen) < 0)
		return PIN_ERR;
	return pc_register_routes(reg, routes, sizeof(routes) / sizeof(routes[0]),
			"appointments", err, errlen);
}

/* The keys appointments.so reads (declared configuration, pin/plugin.h
 * 1.7); the booking rules in caldomain read them through this plugin. */
static const struct pin_config_key apt_config_keys[] = {
	{ "appointments.rate_limit_per_hour", PIN_CFG_INT, "10", PIN_CFG_API, PIN_CFG_RELOAD,
	  0, 1000000, NULL, "bookings", "booking",
	  "appointments an investor may create per rolling hour (a reschedule does not "
	  "count again); 0: no limit; over it: 429 RATE_LIMITED" },
	/* the same declaration as notify.so's (keys.c): the signer and the
	 * verifier of the investors' manage links read one file */
	{ "manage_link_key_file", PIN_CFG_PATH, "", PIN_CFG_API | PIN_CFG_WORKER, 0, 0, 0,
	  NULL, NULL, "manage links",
	  "file of the key of the investors' manage links (one secret of >= 32 bytes a "
	  "line: the first signs, every line verifies; mode 0640 root:pin-calendar); the "
	  "same file on every API and worker host; empty: no links in the messages and "
	  "/manage/ answers 503 (doc/operating.md, \"Manage links\")" },
	{ NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL, NULL }
};

PIN_PLUGIN_DEFINE_CONFIG("appointments", PACKAGE_VERSION, apt_init, NULL, apt_config_keys)

/* notify.c -- notify.so: registration (routes, consumers, the dispatcher). */
#include "config.h"
#include "sdk/sdk.h"
#include "notify.h"
#include "dispatch.h"


const char *const ntf_kinds[] = {
	"AppointmentCreated", "AppointmentConfirmed", "AppointmentCancelled",
	"AppointmentReminder", "CalendarReminder", "CalendarEventRescheduled",
	"CalendarEventOwnerChanged", NULL
};
const char *const ntf_channels[] = { "InApp", "Email", "Sms", NULL };

/* Any authenticated actor; the caller is the principal's sub. */
static const struct pin_route routes[] = {
	{ "GET", "/api/v1/me/notifications", PIN_ACTOR_ANY, NULL, 0,
		ntf_h_list, NULL, NULL },
	{ "POST", "/api/v1/me/notifications/{id}/read", PIN_ACTOR_ANY, NULL, 0,
		ntf_h_read, NULL, NULL },
	{ "GET", "/api/v1/me/notification-settings", PIN_ACTOR_ANY, NULL, 0,
		ntf_h_settings_get, NULL, NULL },
	{ "PUT", "/api/v1/me/notification-settings", PIN_ACTOR_ANY, NULL, 0,
		ntf_h_settings_put, NULL, NULL },
};

static int ntf_init(const struct pin_host_api *api, struct pin_registrar *reg,
		char *err, size_t errlen)
{
	pc_init(api);
	if (pc_register_routes(reg, routes, sizeof(routes) / sizeof(routes[0]),
			"notify", err, errlen) < 0)
		return -1;
	if (ntf_events_register(reg, err, errlen) < 0 ||
	    ntf_contacts_register(reg, err, errlen) < 0 ||
	    ntf_dispatch_register(api, reg, err, errlen) < 0 ||
	    ntf_retention_register(reg, err, errlen) < 0)
		return -1;
	/* real-time in-app (stream.c, push.c) */
	if (ntf_stream_register(reg, err, errlen) < 0 ||
	    ntf_push_register(reg, err, errlen) < 0)
		return -1;
	return 0;
}

PIN_PLUGIN_DEFINE_CONFIG("notify", PACKAGE_VERSION, ntf_init, ntf_dispatch_fini,
	ntf_config_keys)

/* workers.c -- workers.so: polling jobs and CRM/identity consumers. */
#include "config.h"
#include "workers.h"

const struct pin_host_api *wrk_api;

static int wrk_init(const struct pin_host_api *api, struct pin_registrar *reg,
		char *err, size_t errlen)
{
	wrk_api = api;
	if (wrk_reminders_register(reg, err, errlen) < 0)
		return -1;
	if (wrk_slots_register(reg, err, errlen) < 0)
		return -1;
	if (wrk_identity_register(reg, err, errlen) < 0)
		return -1;
	if (wrk_appointments_register(reg, err, errlen) < 0)
		return -1;
	if (wrk_crm_booking_register(reg, err, errlen) < 0)
		return -1;
	if (wrk_crm_deal_register(reg, err, errlen) < 0)
		return -1;
	return 0;
}

PIN_PLUGIN_DEFINE("workers", PACKAGE_VERSION, wrk_init, NULL)

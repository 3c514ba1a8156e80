/* workers.c -- workers.so: polling jobs and CRM/identity consumers.  The
 * entry only: sets the host table once and registers every part. */
#include "config.h"
#include "sdk/sdk.h"
#include "workers.h"

static const pc_register_fn parts[] = {
	wrk_reminders_register,
	wrk_slots_register,
	wrk_identity_register,
	wrk_appointments_register,
	wrk_crm_booking_register,
	wrk_housekeeping_register,
	wrk_crm_deal_register,
};

static int wrk_init(const struct pin_host_api *api, struct pin_registrar *reg,
		char *err, size_t errlen)
{
	pc_init(api);
	return pc_register_all(reg, parts, sizeof(parts) / sizeof(parts[0]), err, errlen);
}

PIN_PLUGIN_DEFINE_CONFIG("workers", PACKAGE_VERSION, wrk_init, NULL, wrk_config_keys)

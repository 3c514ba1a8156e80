/* crm_rules.c -- pure decisions of the CRM booking sync (see crm_rules.h). */
#include "config.h"
#include <string.h>
#include "caldomain/crm_rules.h"

const char *cd_crm_expired_reason(const char *phase)
{
	if (phase && !strcmp(phase, "Reserve"))
		return "Резерв истёк";
	if (phase && !strcmp(phase, "Booking"))
		return "Бронь истекла";
	return "Бронирование истекло";
}

const char *cd_crm_title_prefix(const char *phase)
{
	return phase && !strcmp(phase, "Reserve") ? "Оплата резерва до " :
		"Дедлайн брони: подтвердить/продлить до ";
}

size_t cd_crm_phase_offsets(const char *phase, int out[2])
{
	if (phase && !strcmp(phase, "Reserve")) {
		out[0] = 30;
		return 1;
	}
	out[0] = 1440;
	out[1] = 60;
	return 2;
}

enum cd_crm_upsert cd_crm_upsert_action(const char *link_status, int64_t cur_start_us,
		int64_t new_us, int can_move)
{
	if (!link_status)
		return CD_CRM_CREATE;
	if (!can_move || strcmp(link_status, "Open") != 0 || cur_start_us == new_us)
		return CD_CRM_NOOP;
	return CD_CRM_MOVE;
}

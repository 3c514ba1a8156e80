/* agent.c -- agent availability from the identity replica and the cascade
 * of a departure (caldomain/agent.h). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/sdk.h"
#include "caldomain/appointment.h"
#include "caldomain/agent.h"

int cd_agent_active(const char *user_id, int *active)
{
	const char *p[1] = { user_id };
	PGresult *res = pc_api->db_exec_prepared("cal_agent_active",
		"SELECT NOT EXISTS (SELECT 1 FROM calendar.user_replicas u "
		"  WHERE u.user_id = $1::uuid AND u.status <> 'Active')", 1, p);

	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	*active = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	return 0;
}

int cd_agent_slots_lock(const char *owner_user_id)
{
	const char *p[1] = { owner_user_id };
	PGresult *res = pc_api->db_exec_prepared("cal_agent_slots_lock",
		"SELECT pg_advisory_xact_lock(hashtextextended('calendar.slots:' || $1, 0))",
		1, p);

	return pc_res_ok(res, PGRES_TUPLES_OK) ? 0 : PIN_ERR_DB;
}

int cd_agent_depart(const char *user_id, int64_t now_us, struct cd_agent_departure *out)
{
	const char *p[2] = { user_id, pc_time_param(now_us) };
	PGresult *res;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = cd_agent_slots_lock(user_id)) < 0)
		return rc;
	/* Available slots first: a booking racing with us either took its slot
	 * before (we wait for it, then see it Booked and decline its Pending
	 * appointment below) or finds the slot Archived */
	res = pc_api->db_exec_prepared("cal_agent_archive_slots",
		"UPDATE calendar.availability_slots s SET status = 'Archived', "
		"  version = s.version + 1, updated_at = $2::timestamptz "
		"WHERE s.owner_user_id = $1::uuid AND s.status = 'Available'", 2, p);
	if (!pc_res_ok(res, PGRES_COMMAND_OK))
		return PIN_ERR_DB;
	out->archived = atoi(PQcmdTuples(res));
	if ((rc = cd_apt_decline_unavailable(user_id, now_us, &out->declined)) < 0)
		return rc;
	res = pc_api->db_exec_prepared("cal_agent_confirmed_left",
		"SELECT count(*) FROM calendar.appointments a "
		"WHERE a.agent_user_id = $1::uuid AND a.status = 'Confirmed' "
		"  AND a.end_at > $2::timestamptz", 2, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	out->confirmed = atoi(PQgetvalue(res, 0, 0));
	return 0;
}

/* publish.c -- the outbox put helper (the write and its message commit together). */
#include "config.h"
#include "sdk/publish.h"


int pc_outbox(const char *topic, const char *key, const char *event_type,
		const char *aggregate_type, const char *aggregate_id, json_object *payload)
{
	int rc = pc_api->outbox_put(topic, key, event_type, aggregate_type,
			aggregate_id, payload);

	json_object_put(payload);
	return rc == 0 ? 0 : PIN_ERR_DB;
}

int pc_outbox_many(const char *table, const struct pin_outbox_msg *msgs, size_t n)
{
	int rc = pc_api->outbox_put_many(table, msgs, n, sizeof *msgs);

	for (size_t i = 0; i < n; i++)
		json_object_put(msgs[i].payload);
	return rc == 0 ? 0 : PIN_ERR_DB;
}

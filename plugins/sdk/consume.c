/* consume.c -- helpers of Kafka consumers. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "sdk/consume.h"
#include "sdk/body.h"

enum pin_consume_status pc_consume_fail(const struct pin_msg *msg,
		struct pin_consume_result *res, enum pin_consume_status st,
		const char *code, const char *detail, const char *log_msg)
{
	snprintf(res->code, sizeof(res->code), "%s", code);
	snprintf(res->detail, sizeof(res->detail), "%s", detail);
	if (log_msg)
		pc_api->log(PIN_LOG_WARN, log_msg, "messageId", msg->message_id,
				"topic", msg->topic, "code", res->code, "detail", res->detail,
				NULL);
	return st;
}

void pc_contract_check(const struct pin_msg *msg, const char *log_msg,
		const char *metric)
{
	if (msg->contract_version == 1)
		return;
	pc_api->log(PIN_LOG_WARN, log_msg, "messageId", msg->message_id,
			"topic", msg->topic, NULL);
	pc_api->metric_add(metric, NULL, 1);
}

const char *pc_identity_user(json_object *payload, const char **user_id,
		const char **display_name)
{
	if (!payload || !json_object_is_type(payload, json_type_object))
		return "payload is not an object";
	*user_id = pc_jstr(payload, "userId");
	if (!pc_id_ok(*user_id))
		return "userId is missing, not a uuid or the nil uuid";
	*display_name = pc_jstr(payload, "displayName");
	if (!*display_name || !**display_name || strlen(*display_name) > 1000)
		return "displayName is missing, empty or too long";
	return NULL;
}

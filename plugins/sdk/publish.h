/* sdk/publish.h -- the outbox put helper: a state change and its message
 * commit together (call inside the write's transaction). */
#ifndef PIN_SDK_PUBLISH_H
#define PIN_SDK_PUBLISH_H

#include "sdk/core.h"

/* api->outbox_put and releases payload (ownership transfers).  0 / PIN_ERR_DB */
int pc_outbox(const char *topic, const char *key, const char *event_type,
		const char *aggregate_type, const char *aggregate_id, json_object *payload);

#endif

/* sdk/publish.h -- the outbox put helper: a state change and its message
 * commit together (call inside the write's transaction). */
#ifndef PIN_SDK_PUBLISH_H
#define PIN_SDK_PUBLISH_H

#include "sdk/core.h"

/* api->outbox_put and releases payload (ownership transfers).  0 / PIN_ERR_DB */
int pc_outbox(const char *topic, const char *key, const char *event_type,
		const char *aggregate_type, const char *aggregate_id, json_object *payload);

/* The same for n messages into table (NULL = calendar.outbox) in one
 * statement (api->outbox_put_many, ABI 1.4; a plugin built with this
 * header needs a 1.4 host anyway).  Releases every msgs[i].payload (ownership
 * transfers), also on failure.  0 / PIN_ERR_DB: roll back. */
int pc_outbox_many(const char *table, const struct pin_outbox_msg *msgs, size_t n);

#endif

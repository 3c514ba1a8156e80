/* sdk/consume.h -- helpers of Kafka consumers (the handler side of
 * struct pin_consumer). */
#ifndef PIN_SDK_CONSUME_H
#define PIN_SDK_CONSUME_H

#include "sdk/core.h"

/* Fills res->code and res->detail and returns st (RETRY or FATAL).  With
 * log_msg, also a WARN line: messageId, topic, code, detail (no PII); msg
 * is read only then (may be NULL without log_msg). */
enum pin_consume_status pc_consume_fail(const struct pin_msg *msg,
		struct pin_consume_result *res, enum pin_consume_status st,
		const char *code, const char *detail, const char *log_msg);
/* A message of another contract version than 1 is handled anyway
 * (warn-and-proceed, seeds 001, 002, 004): every such message counts in
 * metric{version="N"}; the WARN line (log_msg, with messageId, topic and
 * contractVersion) is written once per (metric, version) and process.
 * metric must be a static string (it is kept). */
void pc_contract_check(const struct pin_msg *msg, const char *log_msg,
		const char *metric);

/*
 * The head every reader of the identity contract (pin.identity.users.v1)
 * checks: an object payload with userId (uuid, not the nil uuid) and displayName (1..1000
 * bytes), borrowed from payload.  NULL when valid, else what is wrong.
 */
const char *pc_identity_user(json_object *payload, const char **user_id,
		const char **display_name);

/* [consume] Set-based batch handlers (pin_consumer.batch_fn, ABI 1.4)
 * split a batch into runs of distinct keys, each one multi-row statement:
 * a key that repeats starts a new run (one key's messages keep their
 * order).  A run holds at most PC_BATCH_RUN_MAX messages. */
#define PC_BATCH_RUN_MAX 256
/* non-zero when key (a uuid text, any case) is among keys[0..n) */
int pc_batch_run_has(const char *const *keys, size_t n, const char *key);

#endif

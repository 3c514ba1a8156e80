/* worker.h -- the worker side of pin-host: polling jobs (jobs.c), the outbox
 * relay (relay*.c), the Kafka consumers (consumer*.c), the consumed envelope
 * (envelope.c) and the shared librdkafka settings (kafka_conf.c).  Built on
 * the core (core.h); the API side is not visible. */
#ifndef PIN_WORKER_H
#define PIN_WORKER_H

#include "core.h"

/* ---- jobs.c / relay.c / consumer.c: worker mode --------------------------- */
int pin_jobs_start(void);
void pin_jobs_stop(void);
int pin_jobs_run_once(void);          /* every job once, in this thread */
int pin_jobs_run_shards(int n, pin_shard_fn fn, void *ud);   /* ABI 1.5 run_shards */
int pin_relay_start(void);
void pin_relay_stop(void);
int pin_relay_run_once(void);         /* publish what is pending, then return */
int pin_consumers_start(void);
void pin_consumers_stop(void);

/* kafka_conf.c: shared librdkafka settings (librdkafka types forward-declared) */
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
/* Bootstrap servers from config kafka_bootstrap ("host:port,..." or "@/path"
 * = read the first line of that file, re-read on every call).  malloc'd,
 * caller frees; NULL (logged once per change) when unset or unreadable. */
char *pin_kafka_bootstrap(void);
/* New librdkafka config with the bootstrap, client.id, logging routed to
 * pin_log and the common settings.  NULL with a reason in err. */
rd_kafka_conf_t *pin_kafka_conf_new(const char *client_id, char *err, size_t errlen);
/* rd_kafka_conf_set; 0 ok, -1 with the reason in err. */
int pin_kafka_conf_set(rd_kafka_conf_t *conf, const char *key, const char *val,
		char *err, size_t errlen);

/* ---- dlq_tool.c: pin-host --dlq CMD ARGS (the plugins of the configuration
 * are loaded; the caller unloads them).  0, 1 a failure, 2 usage. */
int pin_dlq_main(const char *cmd, int argc, char **argv, const char *reason);

/* ---- envelope.c: the events.md envelope of a consumed message ------------ */
/* Parses value (len bytes) into msg->envelope/payload/message_id/event_type/
 * contract_version/created_at_us (borrowed from *env, which the caller puts).
 * 0; or -1 with code ("INVALID_ENVELOPE" / "INVALID_PAYLOAD") and a detail
 * free of values; *env may then be set too (the caller puts it). */
int pin_envelope_parse(const char *value, size_t len, struct pin_msg *msg,
		json_object **env, char *code, size_t codelen, char *detail,
		size_t detlen);

#endif

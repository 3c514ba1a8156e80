/* config_keys.c -- the host's declared configuration: every key pin-host
 * itself reads, with its type, default, modes, bounds, secrecy, whether a
 * reload may change it, and one line for the reference.  Plugins declare
 * their own keys in their descriptors (pin/plugin.h, 1.7).
 *
 * This table is the one source of the defaults: call sites read
 * pin_config_str/int/bool(name) and write none.  doc/configuration.md and
 * doc/pin-host.conf.5 are generated from it (pin-host
 * --print-config-reference md|man); tests/config/check-config.sh fails
 * when they, the packaged pin-host.conf or a call site drift from it.
 *
 * Reload column (PIN_CFG_RELOAD): set when a running host could take a new
 * value by reading the key again at its next use (or by one setter call),
 * without restarting threads, connections, sockets or consumer groups;
 * restart-only otherwise.  A reload (SIGHUP, systemctl reload;
 * pin_config_reload) applies the changed keys of this column and names the
 * others, which keep their running values until a restart. */
#include "config.h"
#include <stddef.h>
#include "core.h"

#define API     PIN_CFG_API
#define WORKER  PIN_CFG_WORKER
#define MIGRATE PIN_CFG_MIGRATE
#define ALL     PIN_CFG_ALL
#define RELOAD  PIN_CFG_RELOAD
#define SECRET  PIN_CFG_SECRET
#define BUILDDEF PIN_CFG_BUILDDEF

#define K(name, type, def, modes, flags, min, max, values, unit, group, desc) \
	{ name, type, def, modes, flags, min, max, values, unit, group, desc }

const struct pin_config_key pin_config_host_keys[] = {
	/* ---- process */
	K("mode", PIN_CFG_ENUM, NULL, API | WORKER, 0, 0, 0, "api|worker", NULL, "process",
	  "api (FastCGI, serves routes) or worker (jobs, consumers, outbox relay); flag --mode; required"),
	K("plugins", PIN_CFG_LIST, "", API | WORKER, 0, 0, 0, NULL, NULL, "process",
	  "plugin names (looked up as <plugin_dir>/<name>.so) or .so paths; flag --plugins"),
	K("plugin_dir", PIN_CFG_PATH, PIN_PLUGIN_DIR, ALL, BUILDDEF, 0, 0, NULL, NULL, "process",
	  "directory of the plugin .so files; every plugin in it declares its keys; flag --plugin-dir"),
	K("pid_file", PIN_CFG_PATH, "", API | WORKER, 0, 0, 0, NULL, NULL, "process",
	  "write the process id to this file (empty: none); flag --pid-file"),
	K("log_level", PIN_CFG_ENUM, "info", ALL, RELOAD, 0, 0, "debug|info|warn|error", NULL,
	  "process", "least severe level logged (JSON lines on stderr); flag --log-level"),

	/* ---- API host */
	K("listen", PIN_CFG_ADDR, "unix:/run/pin-calendar/api.sock", API, 0, 0, 0, "unix", NULL,
	  "API", "where the FastCGI socket listens: unix:/path.sock or host:port; flag --listen"),
	K("listen_trusted_network", PIN_CFG_BOOL, "false", API, 0, 0, 0, NULL, NULL, "API",
	  "allow a TCP listen beyond loopback (FastCGI has no authentication): only on "
	  "a network that nothing but nginx reaches"),
	K("socket_mode", PIN_CFG_OCTAL, "0660", API, 0, 0, 0777, NULL, NULL, "API",
	  "mode of a unix listen socket (octal)"),
	K("socket_group", PIN_CFG_STRING, "", API, 0, 0, 0, NULL, NULL, "API",
	  "group of a unix listen socket (nginx's); empty: the service's own group"),
	K("api_server", PIN_CFG_ENUM, "loop", API, 0, 0, 0, "loop|threads", NULL, "API",
	  "loop: one epoll thread holds nginx's connections, workers run requests; "
	  "threads: libfcgi, a thread per connection; flag --api-server"),
	K("threads", PIN_CFG_INT, "0", API, 0, 0, 10000, NULL, "threads", "API",
	  "request workers (loop; 0 = db_concurrency) or FastCGI threads (threads; "
	  "0 = 2 x CPU cores); flag --threads"),
	K("db_concurrency", PIN_CFG_INT, "0", API, 0, 0, 10000, NULL, "requests", "API",
	  "requests doing database work at once, the others wait in the host; "
	  "0 = 2 x CPU cores; >= threads turns the cap off"),
	K("api_read_timeout_ms", PIN_CFG_DURATION, "30000", API, 0, 100, 3600000, NULL, "ms",
	  "API", "loop: a request must be whole this long after its first byte, else its "
	  "connection is closed"),
	K("api_idle_timeout_ms", PIN_CFG_DURATION, "120000", API, 0, 100, 86400000, NULL, "ms",
	  "API", "loop: a kept-alive connection without a request is closed after this "
	  "(keep it above nginx's upstream keepalive_timeout)"),
	K("api_max_connections", PIN_CFG_INT, "1024", API, 0, 1, 1000000, NULL, "connections",
	  "API", "loop: connections open at once; the next is accepted and closed"),

	/* ---- PostgreSQL */
	K("pg_dsn", PIN_CFG_DSN, "", ALL, 0, 0, 0, NULL, NULL, "PostgreSQL",
	  "libpq connection string of the runtime role (migrate.conf: the migration role); "
	  "flag --pg-dsn"),
	K("pg_dsn_read", PIN_CFG_DSN, "", API, 0, 0, 0, NULL, NULL, "PostgreSQL",
	  "a hot standby for the reads that tolerate staleness (public showcase); "
	  "empty: none; flag --pg-dsn-read"),
	K("read_max_lag_s", PIN_CFG_DURATION, "5", API, 0, 1, 3600, NULL, "s", "PostgreSQL",
	  "reads go back to pg_dsn while the standby lags more than this"),
	K("sql_dir", PIN_CFG_PATH, PIN_SQL_DIR, MIGRATE, BUILDDEF, 0, 0, NULL, NULL, "PostgreSQL",
	  "migrations applied by pin-host --migrate; flag --sql-dir"),

	/* ---- Kafka */
	K("kafka_bootstrap", PIN_CFG_STRING, "", WORKER, RELOAD, 0, 0, NULL, NULL, "Kafka",
	  "bootstrap servers host:port,..., or @/path/file to read them from a file "
	  "(re-read at every client (re)start); flag --kafka-bootstrap"),
	K("kafka_client_id", PIN_CFG_STRING, "pin-host", WORKER, 0, 0, 0, NULL, NULL, "Kafka",
	  "prefix of the client.id of each client (<prefix>-relay, -dlq, -lag, -<group>)"),
	K("kafka_session_timeout_ms", PIN_CFG_DURATION, "6000", WORKER, 0, 1, 3600000, NULL,
	  "ms", "Kafka", "consumer group session timeout (session.timeout.ms)"),
	K("kafka_heartbeat_interval_ms", PIN_CFG_DURATION, "500", WORKER, 0, 1, 3600000, NULL,
	  "ms", "Kafka", "consumer group heartbeat interval (heartbeat.interval.ms)"),
	K("kafka_fetch_wait_max_ms", PIN_CFG_DURATION, "100", WORKER, 0, 0, 300000, NULL, "ms",
	  "Kafka", "longest wait of a fetch for new messages (fetch.wait.max.ms)"),
	K("kafka_assignment_strategy", PIN_CFG_ENUM, "range", WORKER, 0, 0, 0,
	  "range|roundrobin|cooperative-sticky", NULL, "Kafka",
	  "partition assignment strategy of the consumer groups"),
	K("kafka_message_timeout_ms", PIN_CFG_DURATION, "10000", WORKER, 0, 1, 900000, NULL,
	  "ms", "Kafka", "delivery timeout of the outbox relay's producer (message.timeout.ms)"),
	K("kafka_linger_ms", PIN_CFG_DURATION, "5", WORKER, 0, 0, 900000, NULL, "ms", "Kafka",
	  "batching delay of the outbox relay's producer (linger.ms)"),
	K("kafka_log_level", PIN_CFG_INT, "3", WORKER, 0, 0, 7, NULL, "syslog level", "Kafka",
	  "librdkafka's own log level (syslog numbers)"),
	K("kafka_debug", PIN_CFG_STRING, "", WORKER, 0, 0, 0, NULL, NULL, "Kafka",
	  "librdkafka debug contexts, e.g. broker,protocol; empty: none"),
	K("kafka_security_protocol", PIN_CFG_STRING, "", WORKER, 0, 0, 0, NULL, NULL, "Kafka",
	  "security.protocol (e.g. SASL_SSL); empty: librdkafka's default"),
	K("kafka_sasl_mechanism", PIN_CFG_ENUM, "", WORKER, 0, 0, 0,
	  "PLAIN|SCRAM-SHA-256|SCRAM-SHA-512|GSSAPI|OAUTHBEARER", NULL, "Kafka",
	  "sasl.mechanism; empty: librdkafka's default"),
	K("kafka_sasl_username", PIN_CFG_STRING, "", WORKER, 0, 0, 0, NULL, NULL, "Kafka",
	  "sasl.username"),
	K("kafka_sasl_password", PIN_CFG_STRING, "", WORKER, SECRET, 0, 0, NULL, NULL, "Kafka",
	  "sasl.password"),
	K("kafka_ssl_ca_location", PIN_CFG_PATH, "", WORKER, 0, 0, 0, NULL, NULL, "Kafka",
	  "ssl.ca.location: CA certificates of the brokers"),

	/* ---- outbox relay */
	K("relay_batch", PIN_CFG_INT, "1000", WORKER, RELOAD, 1, 100000, NULL, "rows",
	  "outbox relay", "outbox rows per publish batch"),
	K("relay_inflight", PIN_CFG_INT, "4", WORKER, 0, 1, 16, NULL, "batches", "outbox relay",
	  "batches of one shard produced and awaiting delivery reports at once"),
	K("relay_shards", PIN_CFG_INT, "4", WORKER, 0, 1, 1024, NULL, "shards", "outbox relay",
	  "shards of every outbox; the same value on every worker host"),
	K("relay_cursor", PIN_CFG_BOOL, "true", WORKER, 0, 0, 0, NULL, NULL, "outbox relay",
	  "read each shard by a commit-ordered cursor instead of marking every row "
	  "published; marks while a host that marks by choice runs (doc/operating.md, "
	  "outbox relay cursor)"),
	K("relay_threads", PIN_CFG_INT, "2", WORKER, 0, 1, 8, NULL, "threads", "outbox relay",
	  "relay threads per worker host (each its own session and producer)"),
	K("relay_failover_s", PIN_CFG_DURATION, "5", WORKER, 0, 1, 3600, NULL, "s",
	  "outbox relay", "a dead relay host's shards are taken within about this long"),
	K("relay_busy_interval_ms", PIN_CFG_DURATION, "50", WORKER, 0, 1, 60000, NULL, "ms",
	  "outbox relay", "next look for rows after a pass that found some"),
	K("relay_idle_interval_ms", PIN_CFG_DURATION, "100", WORKER, 0, 1, 60000, NULL, "ms",
	  "outbox relay", "next look for rows after a pass that found none"),
	K("relay_rewind_ms", PIN_CFG_DURATION, "250", WORKER, 0, 0, 3600000, NULL, "ms",
	  "outbox relay", "a shard's cursor goes back to its start at most this often "
	  "(late commits with lower ids); 0: whenever nothing is in flight"),
	K("relay_backoff_max_ms", PIN_CFG_DURATION, "30000", WORKER, RELOAD, 1000, 3600000, NULL,
	  "ms", "outbox relay", "longest backoff while the brokers are unreachable"),
	K("relay_once_timeout_ms", PIN_CFG_DURATION, "10000", WORKER, RELOAD, 1, 3600000, NULL,
	  "ms", "outbox relay", "--once: how long the one-shot relay waits for delivery reports"),
	K("relay_park_unknown_topic_attempts", PIN_CFG_INT, "5", WORKER, RELOAD, 1, 1000000,
	  NULL, "attempts", "outbox relay",
	  "a row whose topic the brokers do not know is parked after this many tries"),
	K("relay_log_published", PIN_CFG_BOOL, "true", WORKER, RELOAD, 0, 0, NULL, NULL,
	  "outbox relay", "one INFO line per published row (written once per batch)"),
	K("metrics_textfile", PIN_CFG_PATH, "", WORKER, RELOAD, 0, 0, NULL, NULL, "metrics",
	  "write the metrics (Prometheus text) here at most once a second, for "
	  "node_exporter's textfile collector; empty: off"),
	K("metrics_listen", PIN_CFG_ADDR, "", WORKER, 0, 0, 0, NULL, NULL, "metrics",
	  "host:port of a plain-HTTP listener for GET /metrics and /healthz; empty: off"),

	/* ---- consumers */
	K("consumer_backoff_initial_ms", PIN_CFG_DURATION, "1000", WORKER, RELOAD, 1, 3600000,
	  NULL, "ms", "consumers", "first retry delay of a message whose handler asked for a retry"),
	K("consumer_backoff_max_ms", PIN_CFG_DURATION, "60000", WORKER, RELOAD, 1, 86400000,
	  NULL, "ms", "consumers", "longest retry delay (the delay doubles per retry)"),
	K("consumer_retry_deadline_s", PIN_CFG_DURATION, "86400", WORKER, RELOAD, 1, 31536000,
	  NULL, "s", "consumers", "a message whose handler keeps asking for a retry goes to "
	  "<group>.dlq after this long (not one held by a database outage or an error of "
	  "the database's state: those are retried without a deadline)"),
	K("consumer_batch_max", PIN_CFG_INT, "64", WORKER, 0, 1, 10000, NULL, "messages",
	  "consumers", "fresh messages applied per transaction (a savepoint each; 1: one "
	  "transaction per message)"),
	K("consumer_batch_set_max", PIN_CFG_INT, "500", WORKER, 0, 1, 10000, NULL, "messages",
	  "consumers", "messages per batch of a consumer with a set-based batch handler"),
	K("consumer_lag_interval_ms", PIN_CFG_DURATION, "5000", WORKER, RELOAD, 100, 3600000,
	  NULL, "ms", "consumers", "how often each consumer asks the brokers for its lag"),
	K("dlq_handled_retention_days", PIN_CFG_INT, "90", WORKER, RELOAD, 0, 36500, NULL,
	  "days", "consumers", "dead letters handled (pin-host --dlq replay|ack) longer ago "
	  "than this are deleted from <schema>.dead_letters; 0: kept"),
	K("consumer_commit_async", PIN_CFG_BOOL, "true", WORKER, 0, 0, 0, NULL, NULL,
	  "consumers", "commit offsets asynchronously after each batch's COMMIT (a lost "
	  "commit redelivers; the inbox dedupes)"),

	/* ---- authentication */
	K("jwt_hs256_secret", PIN_CFG_STRING, "", API, SECRET | RELOAD, 32, 4096, NULL, "bytes",
	  "authentication", "HS256 shared secret of the bearer tokens; empty: no HS256"),
	K("jwt_jwks_file", PIN_CFG_PATH, "", API, RELOAD, 0, 0, NULL, NULL,
	  "authentication", "the identity provider's JSON Web Key Set (RFC 7517): RSA "
	  "(>= 2048 bits, RS256) and EC P-256 (ES256) keys chosen by the token's kid; "
	  "needs jwt_issuer and jwt_audience"),
	K("jwt_rs256_public_key_file", PIN_CFG_PATH, "", API, RELOAD, 0, 0, NULL, NULL,
	  "authentication", "the identity service's RSA public key (PEM, >= 2048 bits) for RS256"),
	K("jwt_issuer", PIN_CFG_STRING, "", API, RELOAD, 0, 0, NULL, NULL, "authentication",
	  "required iss of the tokens; empty: not checked"),
	K("jwt_audience", PIN_CFG_STRING, "", API, RELOAD, 0, 0, NULL, NULL, "authentication",
	  "required aud of the tokens; empty: not checked"),

	/* ---- testing */
	K("allow_clock_offset", PIN_CFG_BOOL, "false", ALL, 0, 0, 0, NULL, NULL, "testing",
	  "allow clock_offset_s (time travel for tests); never in production"),
	K("clock_offset_s", PIN_CFG_INT, "0", ALL, 0, -3153600000LL, 3153600000LL, NULL, "s",
	  "testing", "shift the host clock by this many seconds (needs allow_clock_offset); "
	  "flag --clock-offset-s"),

	{ NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL, NULL }
};

/*
 * kafka_conf.c -- librdkafka configuration shared by the outbox relay, the
 * consumers and their DLQ producers.
 *
 * Config keys (all optional but kafka_bootstrap):
 *   kafka_bootstrap        "host:port,..." or "@/path/file": the address is
 *                          the first line of the file, re-read every time a
 *                          client is (re)created (the dev broker listens on a
 *                          new random port after each restart).
 *   kafka_client_id        client.id prefix (default "pin-host")
 *   kafka_log_level        librdkafka syslog level forwarded to our log (default 3)
 *   kafka_debug            librdkafka debug contexts ("broker,protocol")
 *   kafka_security_protocol, kafka_sasl_mechanism, kafka_sasl_username,
 *   kafka_sasl_password, kafka_ssl_ca_location
 *                          passed through when set (production brokers)
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <librdkafka/rdkafka.h>

#include "worker.h"

static pthread_mutex_t boot_mu = PTHREAD_MUTEX_INITIALIZER;
static char *boot_last;         /* last value seen, to log changes only */

/* Reads the first line of path into a malloc'd, trimmed string. */
static char *read_first_line(const char *path, int *err_out)
{
	char buf[4096];
	FILE *f = fopen(path, "r");
	char *s, *e;

	*err_out = 0;
	if (!f) {
		*err_out = errno;
		return NULL;
	}
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		*err_out = ENODATA;
		return NULL;
	}
	fclose(f);
	s = buf;
	while (*s && isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	if (!*s) {
		*err_out = ENODATA;
		return NULL;
	}
	return strdup(s);
}

char *pin_kafka_bootstrap(void)
{
	const char *v = pin_config_str("kafka_bootstrap");
	char *out = NULL;
	int err = 0;

	if (!v || !*v) {
		static int said;         /* once, not at every relay/consumer retry */

		if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
			pin_log(PIN_LOG_ERROR, "kafka_bootstrap is not configured", NULL);
		return NULL;
	}
	if (v[0] == '@')
		out = read_first_line(v + 1, &err);
	else
		out = strdup(v);

	pthread_mutex_lock(&boot_mu);
	if (!out) {
		if (boot_last) {
			pin_log(PIN_LOG_WARN, "kafka bootstrap file unreadable",
					"file", v + 1, "error", strerror(err), NULL);
			free(boot_last);
			boot_last = NULL;
		}
	} else if (!boot_last || strcmp(boot_last, out) != 0) {
		pin_log(PIN_LOG_INFO, "kafka bootstrap", "servers", out, NULL);
		free(boot_last);
		boot_last = strdup(out);
	}
	pthread_mutex_unlock(&boot_mu);
	return out;
}

int pin_kafka_conf_set(rd_kafka_conf_t *conf, const char *key, const char *val,
		char *err, size_t errlen)
{
	char e[512];

	if (rd_kafka_conf_set(conf, key, val, e, sizeof(e)) != RD_KAFKA_CONF_OK) {
		snprintf(err, errlen, "%s: %s", key, e);
		return -1;
	}
	return 0;
}

/* librdkafka log lines -> our JSON log. */
static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	int l = level <= 3 ? PIN_LOG_ERROR : level == 4 ? PIN_LOG_WARN :
		level <= 6 ? PIN_LOG_INFO : PIN_LOG_DEBUG;

	pin_log(l, "librdkafka", "client", rd_kafka_name(rk), "facility", fac,
			"detail", buf, NULL);
}

/* Default error callback: transient broker errors are retried by
 * librdkafka itself; the relay and consumers report state changes. */
static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	(void)opaque;
	pin_log(PIN_LOG_DEBUG, "kafka error", "client", rd_kafka_name(rk),
			"code", rd_kafka_err2name((rd_kafka_resp_err_t)err),
			"detail", reason, NULL);
}

static const struct {
	const char *cfg;
	const char *prop;
} passthrough[] = {
	{ "kafka_security_protocol", "security.protocol" },
	{ "kafka_sasl_mechanism", "sasl.mechanism" },
	{ "kafka_sasl_username", "sasl.username" },
	{ "kafka_sasl_password", "sasl.password" },
	{ "kafka_ssl_ca_location", "ssl.ca.location" },
	{ "kafka_debug", "debug" },
};

rd_kafka_conf_t *pin_kafka_conf_new(const char *client_id, char *err, size_t errlen)
{
	rd_kafka_conf_t *conf = NULL;
	char *boot = NULL;
	char cid[256], lvl[16];
	bool ok = false;

	boot = pin_kafka_bootstrap();
	if (!boot) {
		snprintf(err, errlen, "no kafka bootstrap address");
		goto out;
	}
	conf = rd_kafka_conf_new();
	snprintf(cid, sizeof(cid), "%s-%s",
			pin_config_str("kafka_client_id"),
			client_id ? client_id : "client");
	snprintf(lvl, sizeof(lvl), "%lld", pin_config_int("kafka_log_level"));
	if (pin_kafka_conf_set(conf, "bootstrap.servers", boot, err, errlen) ||
			pin_kafka_conf_set(conf, "client.id", cid, err, errlen) ||
			pin_kafka_conf_set(conf, "log_level", lvl, err, errlen) ||
			pin_kafka_conf_set(conf, "socket.keepalive.enable", "true", err, errlen) ||
			pin_kafka_conf_set(conf, "reconnect.backoff.ms", "200", err, errlen) ||
			pin_kafka_conf_set(conf, "reconnect.backoff.max.ms", "5000", err, errlen) ||
			pin_kafka_conf_set(conf, "topic.metadata.refresh.interval.ms", "30000", err, errlen))
		goto out;
	for (size_t i = 0; i < sizeof(passthrough) / sizeof(passthrough[0]); i++) {
		const char *v = pin_config_str(passthrough[i].cfg);

		if (v && *v && pin_kafka_conf_set(conf, passthrough[i].prop, v, err, errlen))
			goto out;
	}
	rd_kafka_conf_set_log_cb(conf, log_cb);
	rd_kafka_conf_set_error_cb(conf, error_cb);
	ok = true;
out:
	free(boot);
	if (!ok && conf) {
		rd_kafka_conf_destroy(conf);
		conf = NULL;
	}
	return conf;
}

/* registry.c -- what plugins registered during init. */
#include "config.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core.h"

struct pin_registry pin_reg;

struct reg_priv {
	const char *plugin;
	int abi_minor;              /* the plugin's: which record members exist */
};

#define PLUGIN_OF(reg) (((struct reg_priv *)(reg)->host_private)->plugin)

static int reg_route(struct pin_registrar *reg, const struct pin_route *r)
{
	struct pin_route_entry e = { .r = *r, .plugin = PLUGIN_OF(reg) };
	struct pin_route_entry *n;

	if (pin_route_compile(&e) < 0) {
		pin_log(PIN_LOG_ERROR, "bad route pattern", "plugin", e.plugin,
			"pattern", r->pattern ? r->pattern : "(null)", NULL);
		return -1;
	}
	for (size_t i = 0; i < pin_reg.nroutes; i++)
		if (!strcmp(pin_reg.routes[i].r.method, r->method) &&
		    !strcmp(pin_reg.routes[i].r.pattern, r->pattern)) {
			pin_log(PIN_LOG_ERROR, "duplicate route", "plugin", e.plugin,
				"method", r->method, "pattern", r->pattern, NULL);
			pin_route_entry_clear(&e);
			return -1;
		}
	n = realloc(pin_reg.routes, (pin_reg.nroutes + 1) * sizeof *n);
	if (!n) {
		pin_route_entry_clear(&e);
		return -1;
	}
	pin_reg.routes = n;
	pin_reg.routes[pin_reg.nroutes++] = e;
	return 0;
}

static int reg_job(struct pin_registrar *reg, const struct pin_job *j)
{
	struct pin_job_entry *n;

	if (!j->name || !j->fn || j->interval_ms <= 0) {
		pin_log(PIN_LOG_ERROR, "bad job record (name, fn, interval_ms)",
			"plugin", PLUGIN_OF(reg), "job", j->name ? j->name : "(null)", NULL);
		return -1;
	}
	for (size_t i = 0; i < pin_reg.njobs; i++)
		if (!strcmp(pin_reg.jobs[i].j.name, j->name)) {
			pin_log(PIN_LOG_ERROR, "duplicate job", "job", j->name, NULL);
			return -1;
		}
	n = realloc(pin_reg.jobs, (pin_reg.njobs + 1) * sizeof *n);
	if (!n)
		return -1;
	pin_reg.jobs = n;
	pin_reg.jobs[pin_reg.njobs++] = (struct pin_job_entry){ *j, PLUGIN_OF(reg) };
	/* 1.7: the plugin declares job.<name>.interval_ms (PIN_CFG_JOB_INTERVAL);
	 * without it the job runs at its own interval and the key is unknown */
	if (((struct reg_priv *)reg->host_private)->abi_minor >= 7) {
		char key[300];

		snprintf(key, sizeof key, "job.%s.interval_ms", j->name);
		if (!pin_config_declared(key))
			pin_log(PIN_LOG_WARN, "job registered without a declared interval "
				"key (PIN_CFG_JOB_INTERVAL)", "plugin", PLUGIN_OF(reg),
				"key", key, NULL);
	}
	return 0;
}

/* 1.8: a metric name the host renders as given (NULL: none) */
static bool metric_name_ok(const char *s)
{
	if (!s)
		return true;
	if (!*s || strlen(s) > 200 || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

static int reg_consumer(struct pin_registrar *reg, const struct pin_consumer *c)
{
	struct pin_consumer_entry e = { .plugin = PLUGIN_OF(reg) };
	struct pin_consumer_entry *n;
	size_t nt = 0;

	int minor = ((struct reg_priv *)reg->host_private)->abi_minor;

	/* a plugin built against < 1.4 has a shorter record: batch_fn and
	 * batch_max stay zero (per-message path, the host's batch size);
	 * before 1.8 it names no dlq_metric / lag_metric / version_metric */
	memcpy(&e.c, c, minor >= 8 ? sizeof(e.c) : minor >= 4 ?
			offsetof(struct pin_consumer, dlq_metric) :
			offsetof(struct pin_consumer, batch_fn));
	if (e.c.batch_max < 0)
		e.c.batch_max = 0;
	if (!metric_name_ok(e.c.dlq_metric) || !metric_name_ok(e.c.lag_metric) ||
			!metric_name_ok(e.c.version_metric)) {
		pin_log(PIN_LOG_ERROR, "bad consumer record (dlq_metric, lag_metric, "
			"version_metric: "
			"[a-z_][a-z0-9_]*)", "plugin", PLUGIN_OF(reg), "group",
			c->group ? c->group : "(null)", NULL);
		return -1;
	}

	if (!c->group || !c->topics || !c->fn || !c->topics[0]) {
		pin_log(PIN_LOG_ERROR, "bad consumer record (group, topics, fn)",
			"plugin", PLUGIN_OF(reg), "group", c->group ? c->group : "(null)",
			NULL);
		return -1;
	}
	for (size_t i = 0; i < pin_reg.nconsumers; i++)
		if (!strcmp(pin_reg.consumers[i].c.group, c->group)) {
			pin_log(PIN_LOG_ERROR, "duplicate consumer group", "group",
				c->group, NULL);
			return -1;
		}
	while (c->topics[nt])
		nt++;
	e.topics = calloc(nt + 1, sizeof(char *));
	if (!e.topics)
		return -1;
	for (size_t i = 0; i < nt; i++)
		e.topics[i] = strdup(c->topics[i]);
	e.c.topics = (const char *const *)e.topics;
	if (!e.c.inbox_table)
		e.c.inbox_table = "calendar.inbox";
	n = realloc(pin_reg.consumers, (pin_reg.nconsumers + 1) * sizeof *n);
	if (!n) {
		for (size_t i = 0; i < nt; i++)
			free(e.topics[i]);
		free(e.topics);
		return -1;
	}
	pin_reg.consumers = n;
	pin_reg.consumers[pin_reg.nconsumers++] = e;
	return 0;
}

/* "<schema>.<table>" of [a-z0-9_] */
static bool outbox_name_ok(const char *t)
{
	const char *dot;

	if (!t || !(dot = strchr(t, '.')) || dot == t || !dot[1] || strlen(t) > 120)
		return false;
	for (const char *p = t; *p; p++)
		if (p != dot && !((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
				*p == '_'))
			return false;
	return true;
}

static int outbox_add(const char *table)
{
	char **n;

	for (size_t i = 0; i < pin_reg.noutboxes; i++)
		if (!strcmp(pin_reg.outboxes[i], table))
			return 0;
	n = realloc(pin_reg.outboxes, (pin_reg.noutboxes + 1) * sizeof *n);
	if (!n)
		return -1;
	pin_reg.outboxes = n;
	if (!(n[pin_reg.noutboxes] = strdup(table)))
		return -1;
	pin_reg.noutboxes++;
	return 0;
}

static int reg_outbox(struct pin_registrar *reg, const char *table)
{
	if (!outbox_name_ok(table)) {
		pin_log(PIN_LOG_ERROR, "bad outbox table name", "plugin", PLUGIN_OF(reg),
			"table", table ? table : "(null)", NULL);
		return -1;
	}
	if (!pin_reg.noutboxes && outbox_add(PIN_OUTBOX_DEFAULT) < 0)
		return -1;
	return outbox_add(table);
}

bool pin_outbox_known(const char *table)
{
	if (!strcmp(table, PIN_OUTBOX_DEFAULT))
		return true;
	for (size_t i = 0; i < pin_reg.noutboxes; i++)
		if (!strcmp(pin_reg.outboxes[i], table))
			return true;
	return false;
}

static int reg_route_replica_ok(struct pin_registrar *reg, const char *method,
		const char *pattern)
{
	if (method && pattern && !strcmp(method, "GET"))
		for (size_t i = 0; i < pin_reg.nroutes; i++)
			if (!strcmp(pin_reg.routes[i].r.method, method) &&
			    !strcmp(pin_reg.routes[i].r.pattern, pattern) &&
			    /* only the plugin's own routes: another's may need
			     * read-your-writes */
			    !strcmp(pin_reg.routes[i].plugin, PLUGIN_OF(reg))) {
				pin_reg.routes[i].replica_ok = true;
				return 0;
			}
	pin_log(PIN_LOG_ERROR, "route_replica_ok: no such GET route", "plugin",
		PLUGIN_OF(reg), "method", method ? method : "(null)", "pattern",
		pattern ? pattern : "(null)", NULL);
	return -1;
}

struct pin_registrar *pin_registrar_new(const char *plugin)
{
	struct pin_registrar *r = calloc(1, sizeof *r);
	struct reg_priv *p = calloc(1, sizeof *p);

	if (!r || !p) {
		free(r);
		free(p);
		return NULL;
	}
	p->plugin = plugin;
	p->abi_minor = PIN_ABI_MINOR;
	r->size = sizeof *r;
	r->route = reg_route;
	r->job = reg_job;
	r->consumer = reg_consumer;
	r->host_private = p;
	r->outbox = reg_outbox;
	r->route_replica_ok = reg_route_replica_ok;
	return r;
}

void pin_registrar_set_minor(struct pin_registrar *r, int abi_minor)
{
	((struct reg_priv *)r->host_private)->abi_minor = abi_minor;
}

void pin_registrar_free(struct pin_registrar *r)
{
	if (!r)
		return;
	free(r->host_private);
	free(r);
}

void pin_registry_free(void)
{
	for (size_t i = 0; i < pin_reg.nroutes; i++) {
		if (pin_reg.routes[i].r.ud_free)
			pin_reg.routes[i].r.ud_free(pin_reg.routes[i].r.ud);
		pin_route_entry_clear(&pin_reg.routes[i]);
	}
	for (size_t i = 0; i < pin_reg.njobs; i++)
		if (pin_reg.jobs[i].j.ud_free)
			pin_reg.jobs[i].j.ud_free(pin_reg.jobs[i].j.ud);
	for (size_t i = 0; i < pin_reg.nconsumers; i++) {
		struct pin_consumer_entry *e = &pin_reg.consumers[i];
		if (e->c.ud_free)
			e->c.ud_free(e->c.ud);
		for (size_t j = 0; e->topics[j]; j++)
			free(e->topics[j]);
		free(e->topics);
	}
	free(pin_reg.routes);
	free(pin_reg.jobs);
	free(pin_reg.consumers);
	for (size_t i = 0; i < pin_reg.noutboxes; i++)
		free(pin_reg.outboxes[i]);
	free(pin_reg.outboxes);
	memset(&pin_reg, 0, sizeof pin_reg);
}

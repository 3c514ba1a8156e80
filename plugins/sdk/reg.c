/* reg.c -- registration of route tables and consumers (init only). */
#include "config.h"
#include <stdio.h>
#include "sdk/reg.h"


int pc_register_routes(struct pin_registrar *reg, const struct pin_route *routes,
		size_t n, const char *plugin, char *err, size_t errlen)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (reg->route(reg, &routes[i]) < 0) {
			snprintf(err, errlen, "%s: cannot register %s %s", plugin,
					routes[i].method, routes[i].pattern);
			return PIN_ERR;
		}
	return 0;
}

int pc_register_consumer(struct pin_registrar *reg, const struct pin_consumer *c,
		const char *plugin, char *err, size_t errlen)
{
	if (reg->consumer(reg, c) < 0) {
		snprintf(err, errlen, "%s: cannot register consumer %s", plugin, c->group);
		return PIN_ERR;
	}
	return 0;
}

int pc_register_job(struct pin_registrar *reg, const struct pin_job *j,
		const char *plugin, char *err, size_t errlen)
{
	if (reg->job(reg, j) < 0) {
		snprintf(err, errlen, "%s: cannot register job %s", plugin, j->name);
		return PIN_ERR;
	}
	return 0;
}

int pc_register_all(struct pin_registrar *reg, const pc_register_fn *fns, size_t n,
		char *err, size_t errlen)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (fns[i](reg, err, errlen) < 0)
			return PIN_ERR;
	return 0;
}

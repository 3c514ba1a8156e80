/* sdk/reg.h -- registration tables (init only; the host copies the records). */
#ifndef PIN_SDK_REG_H
#define PIN_SDK_REG_H

#include "sdk/core.h"

/*
 * Registers the n routes of a plugin's table.  0, or PIN_ERR with
 * "<plugin>: cannot register METHOD PATTERN" in err.
 */
int pc_register_routes(struct pin_registrar *reg, const struct pin_route *routes,
		size_t n, const char *plugin, char *err, size_t errlen);
/* One consumer: 0, or PIN_ERR with "<plugin>: cannot register consumer
 * GROUP" in err. */
int pc_register_consumer(struct pin_registrar *reg, const struct pin_consumer *c,
		const char *plugin, char *err, size_t errlen);

/* One polling job: 0, or PIN_ERR with "<plugin>: cannot register job NAME"
 * in err. */
int pc_register_job(struct pin_registrar *reg, const struct pin_job *j,
		const char *plugin, char *err, size_t errlen);

/* A plugin part's registration function (a table of these is the init of a
 * plugin made of several parts).  0, or PIN_ERR with a reason in err. */
typedef int (*pc_register_fn)(struct pin_registrar *reg, char *err, size_t errlen);
/* Runs the n functions in order; the first failure ends the run. */
int pc_register_all(struct pin_registrar *reg, const pc_register_fn *fns, size_t n,
		char *err, size_t errlen);

#endif

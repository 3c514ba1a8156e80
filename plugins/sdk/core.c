/* core.c -- the host table of the plugin (pc_init) and permission checks. */
#include "config.h"
#include <string.h>
#include "sdk/core.h"


const struct pin_host_api *pc_api;

void pc_init(const struct pin_host_api *api)
{
	pc_api = api;
}

int pc_has_perm(const struct pin_principal *p, const char *perm)
{
	size_t i;

	if (!p)
		return 0;
	for (i = 0; i < p->n_permissions; i++)
		if (strcmp(p->permissions[i], perm) == 0)
			return 1;
	return 0;
}

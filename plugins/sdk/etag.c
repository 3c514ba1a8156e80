/* etag.c -- If-Match preconditions. */
#include "config.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/etag.h"
#include "sdk/problem.h"


int pc_parse_if_match(const char *v, int *version)
{
	char *end;
	long n;
	size_t len;

	if (!v)
		return PIN_ERR;
	while (*v == ' ')
		v++;
	if (strncmp(v, "W/", 2) == 0)
		v += 2;
	len = strlen(v);
	while (len && v[len - 1] == ' ')
		len--;
	/* an entity-tag is quoted (RFC 9110 8.8.3): a bare 3 is no entity-tag */
	if (len < 2 || v[0] != '"' || v[len - 1] != '"')
		return PIN_ERR;
	v++;
	len -= 2;
	if (len == 0 || len > 10 || !isdigit((unsigned char)v[0]))
		return PIN_ERR;
	n = strtol(v, &end, 10);
	if ((size_t)(end - v) != len || n < 0 || n > 2147483647L)
		return PIN_ERR;
	*version = (int)n;
	return 0;
}

int pc_if_match(struct pin_req *r, int *present, int *version)
{
	const char *v = pc_api->req_header(r, "If-Match");

	*present = 0;
	if (!v || !*v)
		return 0;
	if (pc_parse_if_match(v, version) != 0) {
		pc_problem(r, 400, "MALFORMED_REQUEST",
				"If-Match must be a quoted version number, e.g. \"3\"");
		return PC_E_RESPONDED;
	}
	*present = 1;
	return 0;
}

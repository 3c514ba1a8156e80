/* page.c -- keyset paging: opaque cursors and {items, nextCursor} pages. */
#include "config.h"
#include <ctype.h>
#include <string.h>
#include <stdlib.h>
#include "sdk/page.h"
#include "sdk/pg.h"

void pc_hex_encode(const char *plain, char *out)
{
	static const char hx[] = "0123456789abcdef";

	for (; *plain; plain++) {
		*out++ = hx[((unsigned char)*plain) >> 4];
		*out++ = hx[((unsigned char)*plain) & 15];
	}
	*out = 0;
}

/* Two hex digits at s -> 0..255, or -1. */
static int hex_byte(const char *s)
{
	char two[3] = { s[0], s[1], 0 };

	if (!isxdigit((unsigned char)two[0]) || !isxdigit((unsigned char)two[1]))
		return -1;
	return (int)strtol(two, NULL, 16);
}

int pc_cursor_parse(const char *cursor, int64_t *us, char id[37])
{
	char plain[96], *bar, *end;
	size_t len, i;
	long long v;

	if (!cursor)
		return PIN_ERR;
	len = strlen(cursor);
	if (len == 0 || len % 2 || len / 2 >= sizeof(plain))
		return PIN_ERR;
	for (i = 0; i < len / 2; i++) {
		int byte = hex_byte(cursor + 2 * i);

		if (byte < 0)
			return PIN_ERR;
		plain[i] = (char)byte;
	}
	plain[len / 2] = 0;
	bar = strchr(plain, '|');
	if (!bar || bar == plain)
		return PIN_ERR;
	*bar = 0;
	v = strtoll(plain, &end, 10);
	if (*end)
		return PIN_ERR;
	if (!pc_api->is_uuid(bar + 1))
		return PIN_ERR;
	*us = v;
	memcpy(id, bar + 1, 37);
	return 0;
}

char *pc_cursor_make(int64_t us, const char *id)
{
	/* "<us>|<id>" hex-encoded; the digits as "%lld" writes them (no
	 * printf: the hot lists make one per page) */
	char buf[160], dig[24], *plain = buf, *p, *d = dig + sizeof(dig);
	uint64_t u = us < 0 ? (uint64_t)0 - (uint64_t)us : (uint64_t)us;
	size_t idl = id ? strlen(id) : 0, dl;
	char *out;

	if (!id)
		return NULL;
	do {
		*--d = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (us < 0)
		*--d = '-';
	dl = (size_t)(dig + sizeof(dig) - d);
	if (dl + 1 + idl + 1 > sizeof(buf) && !(plain = pc_api->alloc(dl + 1 + idl + 1)))
		return NULL;
	p = plain;
	memcpy(p, d, dl);
	p += dl;
	*p++ = '|';
	memcpy(p, id, idl + 1);
	out = pc_api->alloc((dl + 1 + idl) * 2 + 1);
	if (!out)       /* out of memory */
		return NULL;
	pc_hex_encode(plain, out);
	return out;
}

enum pc_field pc_q_cursor(struct pin_req *r, int64_t *us, char id[37],
		struct pc_errs *e)
{
	const char *cursor = pc_api->req_query(r, "cursor");

	id[0] = '\0';
	if (!cursor || !*cursor)
		return PC_ABSENT;
	if (pc_cursor_parse(cursor, us, id) != 0) {
		id[0] = '\0';
		pc_errs_add(e, "cursor", "malformed cursor");
		return PC_INVALID;
	}
	return PC_SET;
}

char *pc_next_cursor(const PGresult *res, long long limit, int start_col, int id_col)
{
	int last = (int)limit - 1;

	if (PQntuples(res) <= limit)
		return NULL;
	return pc_cursor_make(pc_col_us(res, last, start_col), pc_col_text(res, last, id_col));
}

json_object *pc_page_json(const PGresult *res, long long limit, int start_col,
		int id_col, json_object *(*item)(const PGresult *res, int row))
{
	json_object *items = json_object_new_array(), *body = json_object_new_object();
	int n = PQntuples(res);

	for (int i = 0; i < n && i < limit; i++)
		json_object_array_add(items, item(res, i));
	json_object_object_add(body, "items", items);
	pc_json_str(body, "nextCursor", pc_next_cursor(res, limit, start_col, id_col));
	return body;
}

json_object *pc_page_json_map(const PGresult *res, long long limit, const char *start_col,
		const char *id_col, const struct pc_jfield *f, size_t n)
{
	struct pc_colmap m;
	json_object *items, *body;
	int start = PQfnumber(res, start_col), id = PQfnumber(res, id_col);

	if (start < 0 || id < 0) {
		pc_api->log(PIN_LOG_ERROR, "page: no such cursor column in the result",
				"column", start < 0 ? start_col : id_col, NULL);
		return NULL;
	}
	if (pc_colmap_init(&m, f, n, res) < 0)
		return NULL;
	items = json_object_new_array();
	body = json_object_new_object();
	for (int i = 0; i < PQntuples(res) && i < limit; i++)
		json_object_array_add(items, pc_colmap_json(&m, res, i));
	json_object_object_add(body, "items", items);
	pc_json_str(body, "nextCursor", pc_next_cursor(res, limit, start, id));
	return body;
}

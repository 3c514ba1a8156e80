/* sdk/page.h -- keyset paging for (instant, uuid) orderings. */
#ifndef PIN_SDK_PAGE_H
#define PIN_SDK_PAGE_H

#include "sdk/body.h"
#include "sdk/colmap.h"

/* Opaque keyset cursor.  make: arena text (hex of "us|uuid").  parse: 0 ok,
 * PIN_ERR malformed (no arena; the uuid check is the host's is_uuid). */
char *pc_cursor_make(int64_t us, const char *id);
int pc_cursor_parse(const char *cursor, int64_t *us, char id[37]);
/* The ?cursor= of a list: PC_SET with *us and id, PC_ABSENT with id[0] = 0,
 * PC_INVALID with a "malformed cursor" error collected (answer 400). */
enum pc_field pc_q_cursor(struct pin_req *r, int64_t *us, char id[37],
		struct pc_errs *e);
/* nextCursor of a page read with LIMIT limit + 1: the cursor of row
 * limit - 1 when there are more rows, else NULL.  Arena. */
char *pc_next_cursor(const PGresult *res, long long limit, int start_col, int id_col);
/* {items: [item(res, row)...] (at most limit), nextCursor} of such a page.
 * New object owned by the caller. */
json_object *pc_page_json(const PGresult *res, long long limit, int start_col,
		int id_col, json_object *(*item)(const PGresult *res, int row));
/* The same page with its items written by the field table f (sdk/colmap.h,
 * resolved once for the page) and the cursor read from the columns named
 * start_col (an instant) and id_col.  NULL when a column is missing. */
json_object *pc_page_json_map(const PGresult *res, long long limit, const char *start_col,
		const char *id_col, const struct pc_jfield *f, size_t n);
/* pure: encode into out (>= 2*(strlen(plain))+1) */
void pc_hex_encode(const char *plain, char *out);

#endif

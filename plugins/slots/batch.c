/* batch.c -- publish and preview an availability batch (domain.md SlotBatch,
 * ADR-0064 p.3/p.6).  Validation is C (rules.c + common getters); the
 * generation is one set-based SQL function, calendar.slot_plan, so preview
 * and publish share every rule. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/sdk.h"
#include "caldomain/agent.h"
#include "slots.h"

static const char *const batch_fields[] = { "kind", "timeZone", "windows", "fromDate",
	"toDate", "slotDurationMinutes", "gapMinutes", "autoConfirm",
	"cancellationCutoffMinutes", "projectId", "propertyObjectId", "location", NULL };
static const char *const window_fields[] = { "daysOfWeek", "from", "to", NULL };
static const char *const slot_kinds[] = { "Showing", "Consultation", NULL };

struct batch_in {
	const char *kind;
	const char *tz;                 /* canonical */
	const char *windows;            /* normalised JSON text */
	const char *from_date, *to_date;
	long from_d, to_d;
	long long duration, gap, cutoff;
	int auto_confirm;
	const char *project_id, *property_object_id, *location;
};

/* The "HH:MM" member key ("from" or "to": "24:00" allowed) of window w into
 * *minutes; the string, or NULL after adding an error on <pfx>.<key>. */
static const char *window_time(json_object *w, const char *pfx, const char *key,
		int *minutes, struct pc_errs *e)
{
	int is_end = strcmp(key, "to") == 0;
	json_object *v;
	const char *s = NULL;

	if (json_object_object_get_ex(w, key, &v) && v &&
	    json_object_is_type(v, json_type_string))
		s = json_object_get_string(v);
	if (!s || slot_parse_hhmm(s, is_end, minutes) < 0) {
		pc_errs_add(e, pc_api->sprintf("%s.%s", pfx, key), is_end ?
			"must be a local time \"HH:MM\" (00:01..24:00)" :
			"must be a local time \"HH:MM\" (00:00..23:59)");
		return NULL;
	}
	return s;
}

/* Unknown keys of window w (errors "<pfx>.<key>").  1 when there were any. */
static int window_unknown_fields(json_object *w, const char *pfx, struct pc_errs *e)
{
	size_t j;
	int bad = 0;

	json_object_object_foreach(w, key, val) {
		(void)val;
		for (j = 0; window_fields[j]; j++)
			if (strcmp(key, window_fields[j]) == 0)
				break;
		if (!window_fields[j]) {
			pc_errs_add(e, pc_api->sprintf("%s.%s", pfx, key), "unknown field");
			bad = 1;
		}
	}
	return bad;
}

/* daysOfWeek of window w into the new array *nd (distinct 1..7).  1 when
 * invalid (error collected), else 0. */
static int window_days(json_object *w, const char *pfx, json_object **nd,
		struct pc_errs *e)
{
	json_object *days;
	int seen[8] = { 0 };
	size_t j, nd_n;

	*nd = json_object_new_array();
	if (!json_object_object_get_ex(w, "daysOfWeek", &days) || !days ||
	    !json_object_is_type(days, json_type_array) ||
	    (nd_n = json_object_array_length(days)) < 1 || nd_n > 7) {
		pc_errs_add(e, pc_api->sprintf("%s.daysOfWeek", pfx),
				"must be an array of 1 to 7 ISO weekdays (Monday = 1)");
		return 1;
	}
	for (j = 0; j < nd_n; j++) {
		json_object *d = json_object_array_get_idx(days, j);
		int64_t x = d && json_object_is_type(d, json_type_int) ?
			json_object_get_int64(d) : 0;

		if (x < 1 || x > 7 || seen[x]) {
			pc_errs_add(e, pc_api->sprintf("%s.daysOfWeek", pfx),
				"values must be distinct integers 1..7 (Monday = 1)");
			return 1;
		}
		seen[x] = 1;
		json_object_array_add(*nd, json_object_new_int((int)x));
	}
	return 0;
}

/* Window i (an object) into *nw (new, normalised); tracks the shortest
 * window.  1 when invalid (errors collected), else 0. */
static int parse_window(json_object *w, size_t i, json_object **nw, size_t *shortest,
		int *shortest_min, struct pc_errs *e)
{
	const char *pfx = pc_api->sprintf("windows[%zu]", i);
	const char *sfrom, *sto;
	json_object *nd;
	int from_m = -1, to_m = -1, bad;

	bad = window_unknown_fields(w, pfx, e);
	bad |= window_days(w, pfx, &nd, e);
	sfrom = window_time(w, pfx, "from", &from_m, e);
	sto = window_time(w, pfx, "to", &to_m, e);
	if (!sfrom || !sto)
		bad = 1;
	if (from_m >= 0 && to_m >= 0 && slot_rule_window(from_m, to_m)) {
		pc_errs_add(e, pc_api->sprintf("%s.to", pfx), slot_rule_window(from_m, to_m));
		bad = 1;
	} else if (from_m >= 0 && to_m >= 0 && to_m - from_m < *shortest_min) {
		*shortest = i;
		*shortest_min = to_m - from_m;
	}
	*nw = json_object_new_object();
	json_object_object_add(*nw, "daysOfWeek", nd);
	json_object_object_add(*nw, "from", json_object_new_string(sfrom ? sfrom : ""));
	json_object_object_add(*nw, "to", json_object_new_string(sto ? sto : ""));
	return bad;
}

/* Validates windows into a normalised array (new object) or NULL.  *shortest
 * gets the index of the shortest window and *shortest_min its length. */
static json_object *parse_windows(json_object *body, struct pc_errs *e, size_t *shortest,
		int *shortest_min)
{
	json_object *arr, *out = NULL, *nw;
	size_t i, n;
	int bad = 0;

	if (!json_object_object_get_ex(body, "windows", &arr) || !arr) {
		pc_errs_add(e, "windows", "is required");
		return NULL;
	}
	if (!json_object_is_type(arr, json_type_array)) {
		pc_errs_add(e, "windows", "must be an array of {daysOfWeek, from, to}");
		return NULL;
	}
	n = json_object_array_length(arr);
	if (n < 1 || n > SLOT_MAX_WINDOWS) {
		pc_errs_add(e, "windows", "must hold 1 to 14 windows");
		return NULL;
	}
	out = json_object_new_array();
	for (i = 0; i < n; i++) {
		json_object *w = json_object_array_get_idx(arr, i);

		if (!w || !json_object_is_type(w, json_type_object)) {
			pc_errs_add(e, pc_api->sprintf("windows[%zu]", i),
					"must be an object {daysOfWeek, from, to}");
			bad = 1;
			continue;
		}
		bad |= parse_window(w, i, &nw, shortest, shortest_min, e);
		json_object_array_add(out, nw);
	}
	if (bad) {
		json_object_put(out);
		return NULL;
	}
	return out;
}

/* Today's date (days since epoch) in zone tz at the host clock. */
static int today_in(const char *tz, long *today)
{
	const char *p[2];
	PGresult *res;

	p[0] = pc_time_param(pc_api->now_us());
	p[1] = tz;
	res = pc_api->db_exec_prepared("slots_today",
		"SELECT (($1::timestamptz AT TIME ZONE $2)::date - DATE '1970-01-01')", 2, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
		return PIN_ERR_DB;
	*today = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	return 0;
}

/* fromDate / toDate into *in.  1 when both are dates, else 0 (errors
 * collected). */
static int parse_dates(json_object *body, struct batch_in *in, struct pc_errs *e)
{
	int ok = 1;

	if (pc_get_string(body, "fromDate", 1, 10, 10, &in->from_date, e) != PC_SET ||
	    slot_parse_date(in->from_date, &in->from_d) < 0) {
		if (in->from_date)
			pc_errs_add(e, "fromDate", "must be a date YYYY-MM-DD");
		ok = 0;
	}
	if (pc_get_string(body, "toDate", 1, 10, 10, &in->to_date, e) != PC_SET ||
	    slot_parse_date(in->to_date, &in->to_d) < 0) {
		if (in->to_date)
			pc_errs_add(e, "toDate", "must be a date YYYY-MM-DD");
		ok = 0;
	}
	return ok;
}

/* The slot shape (duration against the shortest window, gap, confirmation,
 * cutoff) and the optional references into *in. */
static void parse_options(json_object *body, struct batch_in *in, int have_windows,
		size_t shortest, int shortest_min, struct pc_errs *e)
{
	long long v;
	int b;

	if (pc_get_int(body, "slotDurationMinutes", 1, SLOT_DURATION_MIN, SLOT_DURATION_MAX,
			&in->duration, e) == PC_SET && have_windows &&
	    slot_rule_per_window(0, shortest_min, (int)in->duration, 0) == 0)
		pc_errs_add(e, pc_api->sprintf("windows[%zu].to", shortest),
			"the window is shorter than slotDurationMinutes: it would give no slot");
	if (pc_get_int(body, "gapMinutes", 0, 0, SLOT_GAP_MAX, &v, e) == PC_SET)
		in->gap = v;
	if (pc_get_bool(body, "autoConfirm", 0, &b, e) == PC_SET)
		in->auto_confirm = b;
	if (pc_get_int(body, "cancellationCutoffMinutes", 0, 0, SLOT_CUTOFF_MAX, &v, e) == PC_SET)
		in->cutoff = v;
	pc_get_uuid(body, "projectId", 0, &in->project_id, e);
	pc_get_uuid(body, "propertyObjectId", 0, &in->property_object_id, e);
	pc_get_string(body, "location", 0, 0, SLOT_LOCATION_MAX, &in->location, e);
}

/*
 * Validates the batch body into *in.  0 ok; PC_E_RESPONDED after a 422;
 * PIN_ERR_DB.
 */
static int parse_batch(struct pin_req *r, struct batch_in *in)
{
	struct pc_errs e;
	json_object *body, *win = NULL;
	const char *tzname = NULL, *field;
	const char *msg;
	int rc = 0, tz_unknown = 0, dates_ok, shortest_min = 24 * 60 + 1;
	size_t shortest = 0;
	long today;

	pc_errs_init(&e);
	memset(in, 0, sizeof(*in));
	in->cutoff = SLOT_CUTOFF_DEFAULT;
	body = pc_body(r, &e);
	if (!body)
		goto respond;
	pc_check_fields(body, batch_fields, &e);
	pc_get_enum(body, "kind", 1, slot_kinds, &in->kind, &e);
	if (pc_get_string(body, "timeZone", 1, 1, 64, &tzname, &e) == PC_SET) {
		rc = pc_tz_lookup(tzname, &in->tz);
		if (rc < 0 && rc != PC_E_TZ)
			goto out;
		if (rc == PC_E_TZ) {
			tz_unknown = 1;
			pc_errs_add(&e, "timeZone", PC_TZ_UNKNOWN_MSG);
		}
		rc = 0;
	}
	win = parse_windows(body, &e, &shortest, &shortest_min);
	dates_ok = parse_dates(body, in, &e);
	parse_options(body, in, win != NULL, shortest, shortest_min, &e);

	if (dates_ok && in->tz) {
		rc = today_in(in->tz, &today);
		if (rc < 0)
			goto out;
		msg = slot_rule_dates(in->from_d, in->to_d, today, &field);
		if (msg)
			pc_errs_add(&e, field, msg);
	}
respond:
	if (e.n > 0) {
		pc_errs_respond_422(r, "the batch is not valid", &e, tz_unknown);
		rc = PC_E_RESPONDED;
		goto out;
	}
	in->windows = pc_api->strdup(json_object_to_json_string_ext(win,
				JSON_C_TO_STRING_PLAIN));
out:
	pc_errs_free(&e);
	if (win)
		json_object_put(win);
	return rc;
}

/* Runs calendar.slot_plan for the batch.  Columns: local_date, local_start
 * (HH:MM), start_us, end_us (us(start_at), us(end_at)), reason. */
static PGresult *plan(const struct batch_in *in, const char *owner, int *n_keep)
{
	const char *p[8];
	char dur[24], gap[24];
	PGresult *res;
	int i, n;

	snprintf(dur, sizeof(dur), "%lld", in->duration);
	snprintf(gap, sizeof(gap), "%lld", in->gap);
	p[0] = owner;
	p[1] = in->tz;
	p[2] = in->windows;
	p[3] = in->from_date;
	p[4] = in->to_date;
	p[5] = dur;
	p[6] = gap;
	p[7] = pc_time_param(pc_api->now_us());
	res = pc_api->db_exec_prepared("slots_plan",
		"SELECT local_date::text AS local_date, "
		"       to_char(local_start, 'HH24:MI') AS local_start, "
		"       calendar.us(start_at) AS start_us, calendar.us(end_at) AS end_us, reason "
		"FROM calendar.slot_plan($1::uuid, $2, $3::jsonb, $4::date, $5::date, "
		"                        $6::int, $7::int, $8::timestamptz)", 8, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return NULL;
	n = PQntuples(res);
	*n_keep = 0;
	for (i = 0; i < n; i++)
		if (PQgetisnull(res, i, 4))
			(*n_keep)++;
	return res;
}

/* 409 AGENT_UNAVAILABLE when the caller's identity replica is not Active
 * (issue 12: a departed agent publishes nothing; a later Active message
 * allows it again).  0 / PC_E_RESPONDED / PIN_ERR_DB. */
static int agent_gate(struct pin_req *r, const char *owner)
{
	int rc, active;

	if ((rc = cd_agent_active(owner, &active)) < 0)
		return rc;
	if (active)
		return 0;
	pc_problem(r, 409, "AGENT_UNAVAILABLE",
		"the agent is not active (identity status); publishing is refused");
	return PC_E_RESPONDED;
}

/* The preview's slots (the plan rows kept: no reason) and skipped (the
 * others), by the plan's column names (sdk/colmap.h). */
static const struct pc_jfield kept_f[] = {
	{ "startAt", "start_us", PC_J_TIME },
	{ "endAt", "end_us", PC_J_TIME },
	{ "localDate", "local_date", PC_J_STR },
	{ "localStart", "local_start", PC_J_STR },
};
static const struct pc_jfield skipped_f[] = {
	{ "localDate", "local_date", PC_J_STR },
	{ "localStart", "local_start", PC_J_STR },
	{ "reason", "reason", PC_J_STR },
};

/* The plan rows with (skipped = 1) or without a reason as an array of f's
 * objects.  NULL when the plan lacks a column. */
static json_object *plan_json(const PGresult *res, int skipped,
		const struct pc_jfield *f, size_t nf)
{
	struct pc_colmap m;
	json_object *arr;
	int i, reason, n = PQntuples(res);

	if (pc_colmap_init(&m, f, nf, res) < 0 || (reason = PQfnumber(res, "reason")) < 0)
		return NULL;
	arr = json_object_new_array();
	for (i = 0; i < n; i++)
		if (PQgetisnull(res, i, reason) != skipped)
			json_object_array_add(arr, pc_colmap_json(&m, res, i));
	return arr;
}

static int too_large(struct pin_req *r, int n)
{
	return pc_problem(r, 422, "SLOT_BATCH_TOO_LARGE", pc_api->sprintf(
			"the batch would create %d slots; at most %d per batch "
			"(shorten the date range or the windows)", n, SLOT_BATCH_MAX));
}

/* Issue 9 item 3: every slot of plan pl (start, end) stays in the supported
 * range of sdk/instant.h.  The date rules (today .. today + 183 days) keep
 * it there today; this guard keeps it so whatever the rules become.  0, or
 * PC_E_RESPONDED after 422 VALIDATION_FAILED (field toDate). */
static int plan_range(struct pin_req *r, const PGresult *pl)
{
	struct pc_errs e;
	int i, n = PQntuples(pl);

	for (i = 0; i < n; i++) {
		if (pc_instant_ok(pc_col_us(pl, i, 2)) && pc_instant_ok(pc_col_us(pl, i, 3)))
			continue;
		pc_errs_init(&e);
		pc_errs_add(&e, "toDate", PC_INSTANT_RANGE_MSG);
		pc_errs_respond(r, 422, "VALIDATION_FAILED", "the request has invalid fields", &e);
		return PC_E_RESPONDED;
	}
	return 0;
}

int slot_h_preview(struct pin_req *r, void *ud)
{
	const struct pin_principal *pr = pc_api->req_principal(r);
	struct batch_in in;
	json_object *body, *slots, *skipped;
	PGresult *res;
	int rc, keep;

	(void)ud;
	if ((rc = parse_batch(r, &in)) < 0)
		return rc == PC_E_RESPONDED ? PIN_OK : rc;
	if ((rc = agent_gate(r, pr->sub)) < 0)
		return rc == PC_E_RESPONDED ? PIN_OK : rc;
	res = plan(&in, pr->sub, &keep);
	if (!res)
		return PIN_ERR_DB;
	if (keep > SLOT_BATCH_MAX)
		return too_large(r, keep);
	if (plan_range(r, res) < 0)
		return PIN_OK;
	slots = plan_json(res, 0, kept_f, PC_NFIELDS(kept_f));
	skipped = plan_json(res, 1, skipped_f, PC_NFIELDS(skipped_f));
	if (!slots || !skipped) {
		json_object_put(slots);
		json_object_put(skipped);
		return PIN_ERR;
	}
	body = json_object_new_object();
	json_object_object_add(body, "slots", slots);
	json_object_object_add(body, "skipped", skipped);
	return pc_api->respond_json(r, 200, body);
}

#define BATCH_COLS \
	"b.id, b.tenant_id, b.owner_user_id, b.kind, b.time_zone, b.windows::text, " \
	"b.from_date::text, b.to_date::text, b.slot_duration_minutes, b.gap_minutes, " \
	"b.auto_confirm, b.cancellation_cutoff_minutes, b.project_id, " \
	"b.property_object_id, b.location, b.created_count, b.skipped_count, " \
	"calendar.us(b.created_at), b.version"

/* The batch of a BATCH_COLS row as the json-c object of the first version
 * printed it (windows: the jsonb text read back and printed plain). */
static void batch_jt(struct pc_jt *w, const PGresult *res, int row)
{
	json_object *win = json_tokener_parse(PQgetvalue(res, row, 5));
	const char *wt = json_object_to_json_string_ext(win,
			JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

	pc_jt_obj(w);
	PC_JT_KV(w, "id", pc_jt_col(w, res, row, 0));
	PC_JT_KV(w, "tenantId", pc_jt_col(w, res, row, 1));
	PC_JT_KV(w, "ownerUserId", pc_jt_col(w, res, row, 2));
	PC_JT_KV(w, "kind", pc_jt_col(w, res, row, 3));
	PC_JT_KV(w, "timeZone", pc_jt_col(w, res, row, 4));
	PC_JT_KV(w, "windows", pc_jt_raw(w, wt, strlen(wt)));
	PC_JT_KV(w, "fromDate", pc_jt_col(w, res, row, 6));
	PC_JT_KV(w, "toDate", pc_jt_col(w, res, row, 7));
	PC_JT_KV(w, "slotDurationMinutes", pc_jt_col_int(w, res, row, 8));
	PC_JT_KV(w, "gapMinutes", pc_jt_col_int(w, res, row, 9));
	PC_JT_KV(w, "autoConfirm", pc_jt_col_bool(w, res, row, 10));
	PC_JT_KV(w, "cancellationCutoffMinutes", pc_jt_col_int(w, res, row, 11));
	PC_JT_KV(w, "projectId", pc_jt_col(w, res, row, 12));
	PC_JT_KV(w, "propertyObjectId", pc_jt_col(w, res, row, 13));
	PC_JT_KV(w, "location", pc_jt_col(w, res, row, 14));
	PC_JT_KV(w, "createdCount", pc_jt_col_int(w, res, row, 15));
	PC_JT_KV(w, "skippedCount", pc_jt_col_int(w, res, row, 16));
	PC_JT_KV(w, "createdAt", pc_jt_col_time(w, res, row, 17));
	PC_JT_KV(w, "version", pc_jt_col_int(w, res, row, 18));
	pc_jt_end_obj(w);
	json_object_put(win);
}

static int count_reason(const PGresult *res, const char *reason)
{
	int i, n = PQntuples(res), c = 0;

	for (i = 0; i < n; i++)
		if (!PQgetisnull(res, i, 4) && strcmp(PQgetvalue(res, i, 4), reason) == 0)
			c++;
	return c;
}

/* One publisher per owner at a time (shared with a departure,
 * caldomain/agent.h): the overlap check of slot_plan then sees every
 * committed slot, and the exclusion constraint is the safety net.  An agent
 * whose identity replica is not Active is refused: 409 AGENT_UNAVAILABLE
 * (PC_E_RESPONDED).  0 / PC_E_RESPONDED / PIN_ERR_DB. */
static int owner_lock(struct pin_req *r, const char *owner)
{
	int rc;

	if ((rc = cd_agent_slots_lock(owner)) < 0)
		return rc;
	return agent_gate(r, owner);
}

/* The slot_batches row of a plan (keep slots kept).  BATCH_COLS row, or NULL
 * on a database error. */
static PGresult *insert_batch(const struct batch_in *in, const struct pin_principal *pr,
		const char *batch_id, const PGresult *pl, int keep, int64_t now)
{
	const char *p[19];
	PGresult *bres;

	p[0] = batch_id;
	p[1] = pr->tenant_id;
	p[2] = pr->sub;
	p[3] = in->kind;
	p[4] = in->tz;
	p[5] = in->windows;
	p[6] = in->from_date;
	p[7] = in->to_date;
	p[8] = pc_api->sprintf("%lld", in->duration);
	p[9] = pc_api->sprintf("%lld", in->gap);
	p[10] = in->auto_confirm ? "true" : "false";
	p[11] = pc_api->sprintf("%lld", in->cutoff);
	p[12] = in->project_id;
	p[13] = in->property_object_id;
	p[14] = in->location;
	p[15] = pc_api->sprintf("%d", keep);
	p[16] = pc_api->sprintf("%d", PQntuples(pl) - keep);
	p[17] = pc_time_param(now);
	p[18] = pc_api->sprintf("{%d,%d,%d}", count_reason(pl, "dst_gap"),
			count_reason(pl, "lead_time"), count_reason(pl, "overlap"));
	bres = pc_api->db_exec_prepared("slots_batch_insert",
		"INSERT INTO calendar.slot_batches AS b (id, tenant_id, owner_user_id, kind, "
		"  time_zone, windows, from_date, to_date, slot_duration_minutes, gap_minutes, "
		"  auto_confirm, cancellation_cutoff_minutes, project_id, property_object_id, "
		"  location, created_count, skipped_count, skipped_dst_gap, skipped_lead_time, "
		"  skipped_overlap, created_at, updated_at) "
		"VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::date, $8::date, $9::int, $10::int, "
		"  $11::boolean, $12::int, $13::uuid, $14::uuid, $15, $16::int, $17::int, "
		"  ($19::int[])[1], ($19::int[])[2], ($19::int[])[3], $18::timestamptz, "
		"  $18::timestamptz) "
		"RETURNING " BATCH_COLS, 19, p);

	return pc_res_ok(bres, PGRES_TUPLES_OK) ? bres : NULL;
}

/*
 * The kept slots of plan pl (keep of them) under batch_id, with new v7 ids
 * (ids[k] for the k-th kept slot, 37 bytes each).  One INSERT .. SELECT FROM
 * unnest(..) without RETURNING: the 201 body is built from what is sent
 * (issue 13: RETURNING the 480 rows and formatting them in SQL cost ~10 ms
 * of PostgreSQL CPU).  0; PC_E_RESPONDED after 409 when a concurrent slot
 * overlaps; PIN_ERR_DB.
 */
static int insert_slots(struct pin_req *r, const char *batch_id, const PGresult *pl,
		int keep, char (*ids)[37])
{
	const char *p[3];
	char *idarr, *starts, *ip, *sp;
	PGresult *res;
	int i, k = 0, n = PQntuples(pl);

	/* the kept slots as two arrays: v7 ids and start instants */
	idarr = pc_api->alloc((size_t)keep * 38 + 3);
	starts = pc_api->alloc((size_t)keep * 40 + 3);
	ip = idarr;
	sp = starts;
	*ip++ = '{';
	*sp++ = '{';
	for (i = 0; i < n; i++) {
		char ts[40];

		if (!PQgetisnull(pl, i, 4))
			continue;
		pc_api->uuid_v7(ids[k]);
		pc_time_fmt(pc_col_us(pl, i, 2), ts, sizeof(ts));
		ip += sprintf(ip, "%s%s", k ? "," : "", ids[k]);
		sp += sprintf(sp, "%s%s", k ? "," : "", ts);
		k++;
	}
	*ip++ = '}';
	*sp++ = '}';
	*ip = 0;
	*sp = 0;
	p[0] = batch_id;
	p[1] = idarr;
	p[2] = starts;
	res = pc_api->db_exec_prepared("slots_insert_batch",
		"INSERT INTO calendar.availability_slots (id, tenant_id, owner_user_id, "
		"  batch_id, kind, start_at, end_at, time_zone, status, auto_confirm, "
		"  cancellation_cutoff_minutes, project_id, property_object_id, location, "
		"  created_at, updated_at, version) "
		"SELECT u.id, b.tenant_id, b.owner_user_id, b.id, b.kind, u.s, "
		"  u.s + make_interval(mins => b.slot_duration_minutes), b.time_zone, "
		"  'Available', b.auto_confirm, b.cancellation_cutoff_minutes, b.project_id, "
		"  b.property_object_id, b.location, b.created_at, b.created_at, 1 "
		"FROM unnest($2::uuid[], $3::timestamptz[]) AS u (id, s) "
		"JOIN calendar.slot_batches b ON b.id = $1::uuid", 3, p);
	if (pc_res_ok(res, PGRES_COMMAND_OK))
		return 0;
	if (res && strcmp(pc_api->db_sqlstate(res), "23P01") == 0) {
		pc_problem(r, 409, "SLOT_NOT_AVAILABLE",
			"a slot of the batch overlaps an active slot created "
			"concurrently; publish again");
		return PC_E_RESPONDED;
	}
	return PIN_ERR_DB;
}

/* A kept slot as slot_json() gives it for the inserted row (SLOT_COLS order):
 * the batch's values (bres), id, the plan's start and end (pl row i). */
static void kept_slot_jt(struct pc_jt *w, const PGresult *bres, const char *id,
		const PGresult *pl, int i)
{
	pc_jt_obj(w);
	PC_JT_KV(w, "id", pc_jt_str(w, id));
	PC_JT_KV(w, "batchId", pc_jt_col(w, bres, 0, 0));
	PC_JT_KV(w, "ownerUserId", pc_jt_col(w, bres, 0, 2));
	PC_JT_KV(w, "tenantId", pc_jt_col(w, bres, 0, 1));
	PC_JT_KV(w, "kind", pc_jt_col(w, bres, 0, 3));
	PC_JT_KV(w, "status", pc_jt_str(w, "Available"));
	PC_JT_KV(w, "startAt", pc_jt_time(w, pc_col_us(pl, i, 2)));
	PC_JT_KV(w, "endAt", pc_jt_time(w, pc_col_us(pl, i, 3)));
	PC_JT_KV(w, "timeZone", pc_jt_col(w, bres, 0, 4));
	PC_JT_KV(w, "autoConfirm", pc_jt_col_bool(w, bres, 0, 10));
	PC_JT_KV(w, "cancellationCutoffMinutes", pc_jt_col_int(w, bres, 0, 11));
	PC_JT_KV(w, "projectId", pc_jt_col(w, bres, 0, 12));
	PC_JT_KV(w, "propertyObjectId", pc_jt_col(w, bres, 0, 13));
	PC_JT_KV(w, "location", pc_jt_col(w, bres, 0, 14));
	PC_JT_KV(w, "version", pc_jt_int(w, 1));
	PC_JT_KV(w, "archiveReason", pc_jt_null(w));
	pc_jt_end_obj(w);
}

/*
 * The 201 body: {batch, created, slots, skipped}; slots in start order (the
 * plan's order: kept slots never overlap, so their starts differ).  JSON
 * text (sdk/jtext.h, issue 13: 480 json-c objects of 15 members took ~15 ms
 * of the host); the bytes the json-c tree of the first version printed (the
 * slots suite compares them).  New object, NULL when out of memory.
 */
static json_object *publish_body(const PGresult *bres, char (*ids)[37],
		const PGresult *pl, int keep)
{
	struct pc_jt w;
	int i, k = 0, n = PQntuples(pl);

	pc_jt_init(&w, 2048 + 512 * (size_t)keep + 64 * (size_t)(n - keep));
	pc_jt_obj(&w);
	PC_JT_K(&w, "batch");
	batch_jt(&w, bres, 0);
	PC_JT_KV(&w, "created", pc_jt_int(&w, keep));
	PC_JT_K(&w, "slots");
	pc_jt_arr(&w);
	for (i = 0; i < n; i++)
		if (PQgetisnull(pl, i, 4))
			kept_slot_jt(&w, bres, ids[k++], pl, i);
	pc_jt_end_arr(&w);
	PC_JT_K(&w, "skipped");
	pc_jt_arr(&w);
	for (i = 0; i < n; i++) {
		if (PQgetisnull(pl, i, 4))
			continue;
		pc_jt_obj(&w);
		PC_JT_KV(&w, "localDate", pc_jt_col(&w, pl, i, 0));
		PC_JT_KV(&w, "localStart", pc_jt_col(&w, pl, i, 1));
		PC_JT_KV(&w, "reason", pc_jt_col(&w, pl, i, 4));
		pc_jt_end_obj(&w);
	}
	pc_jt_end_arr(&w);
	pc_jt_end_obj(&w);
	return pc_jt_body(&w);
}

int slot_h_publish(struct pin_req *r, void *ud)
{
	const struct pin_principal *pr = pc_api->req_principal(r);
	struct batch_in in;
	struct pc_idem idem;
	json_object *body = NULL;
	PGresult *pl, *bres;
	char batch_id[37], (*ids)[37];
	int rc, keep, in_tx = 0;
	int64_t now = pc_api->now_us();

	(void)ud;
	if ((rc = parse_batch(r, &in)) < 0)
		return rc == PC_E_RESPONDED ? PIN_OK : rc;
	if ((rc = slot_tx_begin(r, &idem, &in_tx)) < 0)
		return rc == PC_E_RESPONDED ? PIN_OK : rc;
	if ((rc = owner_lock(r, pr->sub)) < 0) {
		if (rc == PC_E_RESPONDED)
			rc = PIN_OK;
		goto out;
	}
	pl = plan(&in, pr->sub, &keep);
	if (!pl) {
		rc = PIN_ERR_DB;
		goto out;
	}
	if (keep > SLOT_BATCH_MAX) {
		rc = too_large(r, keep);
		goto out;
	}
	if (plan_range(r, pl) < 0) {
		rc = PIN_OK;
		goto out;
	}
	pc_api->uuid_v7(batch_id);
	if (!(bres = insert_batch(&in, pr, batch_id, pl, keep, now))) {
		rc = PIN_ERR_DB;
		goto out;
	}
	ids = pc_api->alloc((size_t)(keep > 0 ? keep : 1) * sizeof(*ids));
	if ((rc = insert_slots(r, batch_id, pl, keep, ids)) < 0) {
		if (rc == PC_E_RESPONDED)
			rc = PIN_OK;
		goto out;
	}
	if (!(body = publish_body(bres, ids, pl, keep))) {
		rc = PIN_ERR;
		goto out;
	}
	if ((rc = slot_tx_commit_respond(r, &idem, &in_tx, 201, &body, NULL)) < 0)
		goto out;
	pc_api->metric_add("pin_calendar_slots_created_total", NULL, keep);
	pc_api->log(PIN_LOG_INFO, "slot batch published", "batchId", batch_id,
			"created", pc_api->sprintf("%d", keep),
			"skipped", pc_api->sprintf("%d", PQntuples(pl) - keep), NULL);
out:
	if (in_tx)
		pc_api->db_rollback();
	if (body)
		json_object_put(body);
	return rc;
}

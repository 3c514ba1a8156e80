/*
 * common.h -- code shared by the calendar plugins (calendar, slots,
 * appointments, workers).  A static convenience library: every .so links its
 * own copy, so each plugin calls pc_init(api) from its init.
 *
 * Three parts:
 *   1. generic HTTP helpers: strict JSON body validation, field getters that
 *      collect errors, query parsing, IANA zones, cursors, If-Match,
 *      Idempotency-Key, time formatting, problem responses, outbox.
 *   2. pure calendar rules (rules.c, no host, no DB: unit-tested):
 *      INV-CAL-1/2/3, reminder arithmetic (seed 000 rules 1-2).
 *   3. the CalendarEvent lifecycle on the database (event.c): create,
 *      reschedule, status transitions, reminder materialisation and the
 *      event-* outbox messages.  Runs inside the caller's transaction.
 *
 * Memory: unless said otherwise, strings returned are in the host arena of
 * the current invocation (never free them).  json_object results are new
 * references owned by the caller.
 *
 * Return convention: 0 ok, negative error (PIN_ERR, PIN_ERR_DB, PC_E_*).
 */
#ifndef PIN_COMMON_H
#define PIN_COMMON_H

#include <stdint.h>
#include <stddef.h>
#include "pin/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The host table of the current plugin; set once by pc_init(). */
extern const struct pin_host_api *pc_api;
void pc_init(const struct pin_host_api *api);

/* ====================================================== errors / responses */

/* Domain error codes returned by the pc_event_* functions (and usable by
 * others); pc_respond_error() maps them to HTTP. */
#define PC_E_NOT_FOUND        -10  /* 404 <entity>_NOT_FOUND */
#define PC_E_TRANSITION       -11  /* 409 INVALID_STATUS_TRANSITION */
#define PC_E_VERSION          -12  /* 409 VERSION_CONFLICT */
#define PC_E_MANAGED          -13  /* 409 EVENT_MANAGED_BY_SOURCE */
#define PC_E_VALIDATION       -14  /* 422 VALIDATION_FAILED (errors collected) */
#define PC_E_TZ               -15  /* 422 UNKNOWN_TIME_ZONE */
#define PC_E_REPLAYED         -16  /* idempotent replay already answered */
#define PC_E_RESPONDED        -17  /* a response was already sent */
/* Positive result: the operation had nothing to change (not an error). */
#define PC_UNCHANGED          1

/*
 * Collector of validation errors: {field, message} objects.  Zero-init or
 * pc_errs_init(); pc_errs_free() when not handed to a response.
 */
struct pc_errs {
	json_object *arr;   /* owned; NULL while empty */
	int n;
};
void pc_errs_init(struct pc_errs *e);
void pc_errs_add(struct pc_errs *e, const char *field, const char *message);
void pc_errs_free(struct pc_errs *e);
/* Answers status/code with the collected errors (ownership moves to the
 * host) and returns PIN_OK. */
int pc_errs_respond(struct pin_req *r, int status, const char *code,
		const char *detail, struct pc_errs *e);

/* respond_problem without errors; returns PIN_OK. */
int pc_problem(struct pin_req *r, int status, const char *code, const char *detail);

/* ============================================================ JSON bodies */

enum pc_field {
	PC_ABSENT = 0,   /* key not present */
	PC_NULL = 1,     /* present with JSON null */
	PC_SET = 2,      /* present, valid, *out written */
	PC_INVALID = 3   /* present but invalid (error collected) */
};

/*
 * The request body as an object.  No body -> an empty object (so optional
 * bodies of transition endpoints behave like {}).  A non-object body adds a
 * "body" error and returns NULL.  Borrowed (or arena-lifetime).
 */
json_object *pc_body(struct pin_req *r, struct pc_errs *e);

/* Strict validation: every key of obj must be in allowed (NULL-terminated);
 * each unknown key adds "unknown field".  Returns the number of unknowns. */
int pc_check_fields(json_object *obj, const char *const *allowed, struct pc_errs *e);

/* Getters.  required: ABSENT or NULL add "is required".  Strings are
 * borrowed from obj.  Lengths are in Unicode code points. */
enum pc_field pc_get_string(json_object *obj, const char *field, int required,
		size_t minlen, size_t maxlen, const char **out, struct pc_errs *e);
enum pc_field pc_get_uuid(json_object *obj, const char *field, int required,
		const char **out, struct pc_errs *e);
enum pc_field pc_get_instant(json_object *obj, const char *field, int required,
		int64_t *out_us, struct pc_errs *e);
enum pc_field pc_get_int(json_object *obj, const char *field, int required,
		long long min, long long max, long long *out, struct pc_errs *e);
enum pc_field pc_get_bool(json_object *obj, const char *field, int required,
		int *out, struct pc_errs *e);
/* values: NULL-terminated list of accepted names (exact match). */
enum pc_field pc_get_enum(json_object *obj, const char *field, int required,
		const char *const *values, const char **out, struct pc_errs *e);
/* int array: max_n elements at most (out has room for max_n), each in
 * [min, max]; distinct != 0 refuses duplicates. */
enum pc_field pc_get_int_array(json_object *obj, const char *field, int required,
		size_t max_n, long long min, long long max, int distinct,
		int *out, size_t *n_out, struct pc_errs *e);

/* ============================================================ query string */

/* Query parameter getters: same states; errors collected (the caller
 * answers 400 MALFORMED_REQUEST for malformed query values). */
enum pc_field pc_q_instant(struct pin_req *r, const char *name, int required,
		int64_t *out_us, struct pc_errs *e);
enum pc_field pc_q_uuid(struct pin_req *r, const char *name, int required,
		const char **out, struct pc_errs *e);
enum pc_field pc_q_int(struct pin_req *r, const char *name, int required,
		long long min, long long max, long long *out, struct pc_errs *e);
enum pc_field pc_q_enum(struct pin_req *r, const char *name, int required,
		const char *const *values, const char **out, struct pc_errs *e);
/* Comma separated uuids (at most max_n) -> a PostgreSQL array literal
 * "{a,b}" (arena), usable as a uuid[] parameter. */
enum pc_field pc_q_uuid_list(struct pin_req *r, const char *name, int required,
		size_t max_n, const char **out_array_literal, struct pc_errs *e);

/* Path parameter that must be a uuid: returns it, or NULL after answering
 * 400 MALFORMED_REQUEST (api.md: "bad uuid ... in path"). */
const char *pc_path_uuid(struct pin_req *r, const char *name);

/* ================================================================== time */

/* Instant -> "2026-12-01T09:00:00Z" (fraction only when non-zero, 6 digits).
 * Arena. */
char *pc_time_str(int64_t us);
/* Pure variant into a caller buffer (>= 40 bytes); returns buf. */
char *pc_time_fmt(int64_t us, char *buf, size_t len);
/* Instant -> SQL timestamptz parameter text (always 6 fraction digits, Z). */
char *pc_time_param(int64_t us);
/* SQL text of a bigint column (epoch microseconds) -> us; -1 on NULL.
 * Select instants as  calendar.us(col)  (a function of migration 0100). */
int64_t pc_col_us(const PGresult *res, int row, int col);

/* ============================================================= time zones */

/*
 * Looks name up case-insensitively in pg_timezone_names (cached per process
 * after the first call; posix/ and right/ duplicates are ignored).  Returns
 * 0 and *canonical (process lifetime, never free) when found, 1 when
 * unknown, PIN_ERR_DB when the list could not be loaded.
 */
int pc_tz_canonical(const char *name, const char **canonical);

/* ================================================================ paging */

/* Opaque keyset cursor for (instant, uuid) orderings.  make: arena text
 * (hex of "us|uuid").  parse: 0 ok, -1 malformed (pure). */
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
/* pure: encode into out (>= 2*(strlen(plain))+1) */
void pc_hex_encode(const char *plain, char *out);

/* ============================================================== If-Match */

/* Parses an If-Match value: "\"3\"", "3", "W/\"3\"" -> 3.  Pure.
 * 0 ok, -1 malformed. */
int pc_parse_if_match(const char *value, int *version);
/* Reads the If-Match header: 0 absent, 1 present (*version set), or
 * PC_E_RESPONDED after answering 400 MALFORMED_REQUEST. */
int pc_if_match(struct pin_req *r, int *version);

/* ======================================================= Idempotency-Key */

/*
 * Idempotency of writes (api.md): calendar.idempotency_keys(caller, key)
 * holds the first successful response for 24 h.  Use inside the write's
 * transaction:
 *
 *     api->db_begin();
 *     rc = pc_idem_begin(r, &idem);      // after db_begin
 *     if (rc == PC_E_REPLAYED || rc == PC_E_RESPONDED) { rollback; return PIN_OK; }
 *     if (rc < 0) { rollback; return rc; }
 *     ... the write, building the response body ...
 *     pc_idem_store(&idem, 201, body, location);   // before commit
 *     api->db_commit(); respond.
 *
 * Without the header pc_idem_begin returns 0 and pc_idem_store does nothing.
 * A concurrent request with the same key waits for the first one (unique
 * index), then replays its response.  The same key with another method,
 * path or body answers 422 VALIDATION_FAILED (field "Idempotency-Key").
 * Failed requests (rolled back) store nothing, so a retry runs again.
 * Replays carry the header "Idempotent-Replayed: true".
 */
struct pc_idem {
	const char *caller;     /* principal sub */
	const char *key;        /* NULL when no header */
	const char *fingerprint;/* method + path + body text */
};
int pc_idem_begin(struct pin_req *r, struct pc_idem *st);
/* body borrowed (serialised); location may be NULL. 0 / PIN_ERR_DB */
int pc_idem_store(const struct pc_idem *st, int status, json_object *body,
		const char *location);

/* ================================================================ output */

/* Adds key -> string or JSON null. */
void pc_json_str(json_object *o, const char *key, const char *v);
/* Adds the text of column col (NULL -> null). */
void pc_json_col(json_object *o, const char *key, const PGresult *res, int row, int col);
/* Adds an instant (epoch us column, see calendar.us()) or null. */
void pc_json_col_time(json_object *o, const char *key, const PGresult *res, int row, int col);
void pc_json_col_int(json_object *o, const char *key, const PGresult *res, int row, int col);
/* PostgreSQL int[] text "{1440,60}" -> JSON array of ints. */
json_object *pc_json_int_array(const char *pg_array);

/* ================================================================ outbox */

/* api->outbox_put and releases payload (ownership transfers).  0 / PIN_ERR_DB */
int pc_outbox(const char *topic, const char *key, const char *event_type,
		const char *aggregate_type, const char *aggregate_id, json_object *payload);

/* True when the principal has permission perm. */
int pc_has_perm(const struct pin_principal *p, const char *perm);

/* ==================================================== pure calendar rules */

/* Enum names (domain.md), NULL-terminated lists usable with pc_get_enum. */
extern const char *const pc_event_kinds[];     /* Showing, Consultation, Meeting, Task, BookingDeadline */
extern const char *const pc_manual_kinds[];    /* Showing, Consultation, Meeting, Task */
extern const char *const pc_event_origins[];   /* Manual, Appointment, CrmBooking */
extern const char *const pc_event_statuses[];  /* Planned, InProgress, Completed, Cancelled */
extern const char *const pc_event_priorities[];/* Normal, High, Critical */

#define PC_MAX_OFFSETS 5
#define PC_OFFSET_MIN 1
#define PC_OFFSET_MAX 40320
#define PC_MAX_EVENT_US (24LL * 3600 * 1000000)

/* Facts of an event that INV-CAL-1 looks at. */
struct pc_kind_facts {
	const char *kind;
	const char *origin;
	int has_end, has_booking, has_deal, has_appointment, has_client;
};
/* INV-CAL-1: NULL when allowed, else a message; *field names the field. */
const char *pc_rule_kind_matrix(const struct pc_kind_facts *f, const char **field);

/* EndAt rule: end absent (has_end = 0) or start < end <= start + 24 h.
 * NULL when fine, else a message. */
const char *pc_rule_span(int64_t start_us, int has_end, int64_t end_us);

/* INV-CAL-2: action "start" | "complete" | "cancel" from status; 0 and
 * *to (static string) when allowed, -1 otherwise. */
int pc_rule_transition(const char *from, const char *action, const char **to);

/* INV-CAL-3: reschedule allowed from status?  1 yes, 0 no. */
int pc_rule_can_reschedule(const char *status);
/* New EndAt keeping the duration; *has_new_end = has_end. */
int64_t pc_rule_reschedule_end(int64_t old_start, int has_end, int64_t old_end,
		int64_t new_start);

/* Reminder offsets: 0..5 distinct values in [1, 40320].  NULL or message. */
const char *pc_rule_offsets(const int *offsets, size_t n);

enum pc_rem_status { PC_REM_PENDING = 1, PC_REM_SENT = 2, PC_REM_SKIPPED = 3 };
/* Seed 000 rule 1: DueAt = StartAt - offset; DueAt <= now -> Skipped. */
enum pc_rem_status pc_rule_reminder(int64_t start_us, int offset_min,
		int64_t now_us, int64_t *due_us);
const char *pc_rem_status_name(enum pc_rem_status s);

/* Number of Unicode code points of a UTF-8 string. */
size_t pc_utf8_len(const char *s);

/* ============================================ CalendarEvent on the database */

/*
 * Column list selecting an event (use with pc_event_json / payloads):
 *   SELECT PC_EVENT_COLS FROM calendar.calendar_events e WHERE ...
 * Column indexes are the PC_EC_* below.
 */
#define PC_EVENT_COLS \
	"e.id, e.tenant_id, e.owner_user_id, e.kind, e.origin, e.status, e.priority, " \
	"e.title, e.description, e.location, calendar.us(e.start_at), calendar.us(e.end_at), " \
	"e.time_zone, e.client_user_id, e.lead_id, e.deal_id, e.booking_id, e.project_id, " \
	"e.property_object_id, e.appointment_id, e.reminder_offsets_minutes, e.cancel_reason, " \
	"calendar.us(e.started_at), calendar.us(e.completed_at), calendar.us(e.cancelled_at), " \
	"calendar.us(e.created_at), calendar.us(e.updated_at), e.version, e.created_by_user_id"
enum {
	PC_EC_ID, PC_EC_TENANT, PC_EC_OWNER, PC_EC_KIND, PC_EC_ORIGIN, PC_EC_STATUS,
	PC_EC_PRIORITY, PC_EC_TITLE, PC_EC_DESCRIPTION, PC_EC_LOCATION, PC_EC_START,
	PC_EC_END, PC_EC_TZ, PC_EC_CLIENT, PC_EC_LEAD, PC_EC_DEAL, PC_EC_BOOKING,
	PC_EC_PROJECT, PC_EC_PROPERTY, PC_EC_APPOINTMENT, PC_EC_OFFSETS,
	PC_EC_CANCEL_REASON, PC_EC_STARTED, PC_EC_COMPLETED, PC_EC_CANCELLED,
	PC_EC_CREATED, PC_EC_UPDATED, PC_EC_VERSION, PC_EC_CREATED_BY, PC_EC__N
};

/* A new event (strings borrowed; NULL = absent). */
struct pc_event_new {
	const char *id;             /* NULL: a UUIDv7 is generated */
	const char *tenant_id, *owner_user_id;
	const char *kind, *origin, *priority;      /* priority NULL = Normal */
	const char *title, *description, *location;
	int64_t start_us;
	int has_end;
	int64_t end_us;
	const char *time_zone;      /* canonical (pc_tz_canonical) */
	const char *client_user_id, *lead_id, *deal_id, *booking_id, *project_id,
		*property_object_id, *appointment_id, *created_by_user_id;
	int has_offsets;            /* 0: default {1440, 60} */
	int offsets[PC_MAX_OFFSETS];
	size_t n_offsets;
};

/*
 * Inserts the event, materialises its reminders (rule 1) and writes
 * event-created to the outbox, in the caller's transaction.  Does not
 * re-validate (call the pc_rule_* first).  *row_out: the event row
 * (PC_EVENT_COLS, arena result, row 0).  0 / PIN_ERR_DB / PIN_ERR.
 */
int pc_event_create(const struct pc_event_new *ev, int64_t now_us, PGresult **row_out);

/*
 * Loads and locks (FOR UPDATE) an event.  tenant_id / owner_user_id may be
 * NULL (system scope).  0 with *row_out, PC_E_NOT_FOUND, PIN_ERR_DB.
 */
int pc_event_lock(const char *id, const char *tenant_id, const char *owner_user_id,
		PGresult **row_out);

/*
 * Status transition on a locked event row (pc_event_lock): INV-CAL-2,
 * reminders Pending -> Skipped on Completed/Cancelled (rule 3), outbox
 * event-status-changed.  cancel_reason only for "cancel" (may be NULL).
 * 0 with *row_out (updated), PC_E_TRANSITION, PIN_ERR_DB.
 */
int pc_event_transition(const PGresult *locked, const char *action,
		const char *cancel_reason, int64_t now_us, PGresult **row_out);

/*
 * Reschedule of a locked event: INV-CAL-3 (duration kept), reminders
 * re-materialised (rule 2), outbox event-rescheduled.
 * 0 with *row_out, PC_E_TRANSITION, PIN_ERR_DB.  A new start equal to the
 * current one is no move (seed 002 publishes every *actual* reschedule):
 * PC_UNCHANGED with *row_out = locked, nothing written, no message.
 */
int pc_event_reschedule(const PGresult *locked, int64_t new_start_us, int64_t now_us,
		PGresult **row_out);

/*
 * Rule 2 for an event: deletes its Pending reminders and materialises the
 * offsets from start_us (rule 1 again).  offsets_pg: PostgreSQL array text
 * "{1440,60}".  0 / PIN_ERR_DB.
 */
int pc_reminders_rematerialise(const char *event_id, int64_t start_us,
		const char *offsets_pg, int64_t now_us);
/* ints -> PostgreSQL array text "{1440,60}" (arena). */
char *pc_pg_int_array(const int *v, size_t n);
/* Rule 3: every Pending reminder of the event -> Skipped.  0 / PIN_ERR_DB */
int pc_reminders_skip(const char *event_id, int64_t now_us);

/* Representations.  New json objects owned by the caller. */
json_object *pc_event_json(const PGresult *res, int row);
/* The card's "reminders" array for an event (query). NULL on DB error. */
json_object *pc_event_reminders_json(const char *event_id);

/* Payloads of the contracts (events.md); new objects, no PII. */
json_object *pc_payload_event_created(const PGresult *res, int row);
json_object *pc_payload_event_rescheduled(const PGresult *res, int row);
json_object *pc_payload_event_status_changed(const PGresult *res, int row,
		const char *previous_status);

#define PC_TOPIC_EVENT_CREATED        "pin.calendar.event-created.v1"
#define PC_TOPIC_EVENT_RESCHEDULED    "pin.calendar.event-rescheduled.v1"
#define PC_TOPIC_EVENT_STATUS_CHANGED "pin.calendar.event-status-changed.v1"
#define PC_TOPIC_REMINDER_DUE         "pin.calendar.reminder-due.v1"

/* ============================================ owner reassignment (event_owner.c) */

#define PC_TOPIC_EVENT_OWNER_CHANGED  "pin.calendar.event-owner-changed.v1"

/*
 * INV-CAL-8: moves a locked event (pc_event_lock) to owner_user_id and
 * tenant_id (NULL = keep the tenant) and writes event-owner-changed (reason,
 * e.g. "ExecutorChanged") to the outbox, in the caller's transaction.
 * Reminders are untouched (their rows follow the event).  0 with *row_out,
 * PC_UNCHANGED (same owner and tenant: nothing written, *row_out = locked),
 * PIN_ERR_DB.  Status and origin are the caller's checks.
 */
int pc_event_change_owner(const PGresult *locked, const char *tenant_id,
		const char *owner_user_id, const char *reason, int64_t now_us,
		PGresult **row_out);
/* event-owner-changed payload (events.md); new object, no PII. */
json_object *pc_payload_event_owner_changed(const PGresult *res, int row,
		const char *previous_tenant_id, const char *previous_owner_user_id,
		const char *reason);

/* ============================================================ registration */

/*
 * Registers the n routes of a plugin's table (init only; the records are
 * copied by the host).  0, or -1 with "<plugin>: cannot register METHOD
 * PATTERN" in err.
 */
int pc_register_routes(struct pin_registrar *reg, const struct pin_route *routes,
		size_t n, const char *plugin, char *err, size_t errlen);
/* One consumer (init only): 0, or -1 with "<plugin>: cannot register
 * consumer GROUP" in err. */
int pc_register_consumer(struct pin_registrar *reg, const struct pin_consumer *c,
		const char *plugin, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* PIN_COMMON_H */

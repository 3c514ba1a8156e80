/* manage.c -- the investors' manage links (issue 32 item 3): a small HTML
 * page at /manage/<token> that cancels one appointment without a login.
 *
 * The token (sdk/manage.h, signed by notify.so into the e-mails and SMS to
 * the investor) names one appointment, one investor, one purpose (cancel),
 * an expiry, a random jti and the recipient's locale (ru / en: the page
 * speaks the language of the message that carried the link).
 *
 *   GET  never changes anything: it says what will happen and shows the
 *        confirm form (a POST to the same URL, without fields: the token in
 *        the path is what a forged cross-site form cannot know).
 *   POST ends the appointment through apt_end (decide.c) with the
 *        investor's cancel of the API (APT_INVESTOR_CANCEL): the same
 *        states, the same cutoff, the same cascade (slot back to the
 *        showcase, event cancelled, reminders skipped) and the same outbox
 *        messages (appointment-cancelled CancelledByInvestor,
 *        event-status-changed).  The jti is recorded in the same
 *        transaction (calendar.manage_link_uses): a link works once.
 *
 * A token of the reschedule purpose shows the agent's free times of the same
 * kind instead (up to 10, as the showcase offers them); each is a form whose
 * POST carries ?slot=<id> and moves the appointment through apt_reschedule
 * (book.c), the API's reschedule: the same guards, anti-spam and rate
 * limit, the new appointment and its messages, the old one Cancelled with
 * rescheduledToAppointmentId.
 *
 * Answers: 200 the page / done; 400 a token that is not ours or was
 * changed; 404 no such appointment (of that investor); 409 the appointment
 * cannot be cancelled any more (final state, cutoff passed); 410 the link
 * expired or was used; 503 manage links are not configured.  Every answer
 * is a page in the token's language (English when there is no readable
 * token), with no-store, no-referrer (the token is in the URL) and a CSP
 * that allows only the inline style and a form to this origin.
 */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "http.h"
#include "sdk/manage.h"

static struct pc_manage_keys keys;      /* read once at init; n == 0: off */

int apt_manage_init(char *err, size_t errlen)
{
	const char *file = pc_api->config_str("manage_link_key_file");
	char why[256];

	memset(&keys, 0, sizeof keys);
	if (!file || !*file) {
		pc_api->log(PIN_LOG_INFO, "manage links off: no manage_link_key_file", NULL);
		return 0;
	}
	if (pc_manage_keys_load(file, &keys, why, sizeof why) < 0) {
		snprintf(err, errlen, "manage_link_key_file: %s", why);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ text */

enum msg {
	M_TITLE, M_CONFIRM_HEAD, M_CONFIRM_TEXT, M_BUTTON, M_DONE_HEAD, M_DONE_TEXT,
	M_BAD, M_EXPIRED, M_USED, M_NOT_FOUND, M_FINAL, M_CUTOFF, M_OFF,
	M_WHEN, M_STATUS,
	M_MOVE_HEAD, M_MOVE_TEXT, M_MOVE_NONE, M_MOVED_HEAD, M_MOVED_TEXT, M_PICK,
	M_SLOT_GONE, M_NOT_NOW, M_AGAIN, M__N
};

static const char *const text[2][M__N] = {
	[PC_MANAGE_RU] = {
		[M_TITLE] = "Ваша встреча",
		[M_CONFIRM_HEAD] = "Отменить встречу?",
		[M_CONFIRM_TEXT] = "Встреча будет отменена, время снова станет свободным, "
			"агент получит уведомление. Отменить это действие нельзя.",
		[M_BUTTON] = "Да, отменить встречу",
		[M_DONE_HEAD] = "Встреча отменена",
		[M_DONE_TEXT] = "Агент получит уведомление. Чтобы выбрать другое время, "
			"запишитесь заново.",
		[M_BAD] = "Ссылка недействительна: её адрес изменён или неполон. "
			"Откройте ссылку из письма или SMS целиком.",
		[M_EXPIRED] = "Срок действия ссылки истёк. Ничего не изменено.",
		[M_USED] = "Эта ссылка уже использована. Ничего не изменено.",
		[M_NOT_FOUND] = "Встреча не найдена.",
		[M_FINAL] = "Эту встречу уже нельзя изменить: она ",
		[M_CUTOFF] = "До начала встречи осталось слишком мало времени, чтобы изменить "
			"её по ссылке. Свяжитесь с агентом.",
		[M_OFF] = "Управление записью по ссылке сейчас недоступно.",
		[M_WHEN] = "Когда",
		[M_STATUS] = "Статус",
		[M_MOVE_HEAD] = "Перенести встречу?",
		[M_MOVE_TEXT] = "Выберите новое время. Прежнее освободится, агент получит "
			"уведомление.",
		[M_MOVE_NONE] = "Сейчас у агента нет другого свободного времени.",
		[M_MOVED_HEAD] = "Встреча перенесена",
		[M_MOVED_TEXT] = "Агент получит уведомление; о новом времени придёт сообщение.",
		[M_PICK] = "Выберите время на странице по ссылке.",
		[M_SLOT_GONE] = "Это время уже занято или недоступно. Ничего не изменено.",
		[M_NOT_NOW] = "Сейчас перенести встречу нельзя (правила записи не позволяют). "
			"Ничего не изменено.",
		[M_AGAIN] = "Выбрать другое время",
	},
	[PC_MANAGE_EN] = {
		[M_TITLE] = "Your appointment",
		[M_CONFIRM_HEAD] = "Cancel this appointment?",
		[M_CONFIRM_TEXT] = "The appointment will be cancelled, the time becomes free "
			"again and the agent is notified. This cannot be undone.",
		[M_BUTTON] = "Yes, cancel the appointment",
		[M_DONE_HEAD] = "Appointment cancelled",
		[M_DONE_TEXT] = "The agent is notified. To choose another time, book again.",
		[M_BAD] = "This link is not valid: its address was changed or cut. "
			"Open the whole link from the e-mail or SMS.",
		[M_EXPIRED] = "This link has expired. Nothing was changed.",
		[M_USED] = "This link has already been used. Nothing was changed.",
		[M_NOT_FOUND] = "No such appointment.",
		[M_FINAL] = "This appointment cannot be changed any more: it is ",
		[M_CUTOFF] = "The appointment starts too soon to be changed through this "
			"link. Please contact the agent.",
		[M_OFF] = "Managing an appointment by link is not available at the moment.",
		[M_WHEN] = "When",
		[M_STATUS] = "Status",
		[M_MOVE_HEAD] = "Move this appointment?",
		[M_MOVE_TEXT] = "Choose a new time. The current one is released and the agent "
			"is notified.",
		[M_MOVE_NONE] = "The agent has no other free time at the moment.",
		[M_MOVED_HEAD] = "Appointment moved",
		[M_MOVED_TEXT] = "The agent is notified; a message about the new time follows.",
		[M_PICK] = "Choose a time on the page of the link.",
		[M_SLOT_GONE] = "That time has just been taken or is no longer offered. "
			"Nothing was changed.",
		[M_NOT_NOW] = "The appointment cannot be moved right now (the booking rules "
			"do not allow it). Nothing was changed.",
		[M_AGAIN] = "Choose another time",
	},
};

/* the appointment's status as the investor reads it */
static const char *status_text(int lang, const char *status)
{
	static const char *const st[][3] = {
		{ "Pending", "ожидает подтверждения агента", "waiting for the agent's confirmation" },
		{ "Confirmed", "подтверждена", "confirmed" },
		{ "Cancelled", "отменена", "cancelled" },
		{ "Declined", "отклонена", "declined" },
		{ "Expired", "не подтверждена вовремя и отменена",
			"cancelled (not confirmed in time)" },
		{ "Completed", "состоялась", "completed" },
		{ "NoShow", "завершена", "closed" },
		{ "Rescheduled", "перенесена на другое время", "moved to another time" },
	};

	for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
		if (!strcmp(st[i][0], status))
			return st[i][1 + lang];
	return status;
}

/* ------------------------------------------------------------------ page */

struct page {
	char *p;
	size_t n, cap;
	int oom;
};

static void put(struct page *b, const char *s)
{
	size_t len = strlen(s);

	if (b->oom)
		return;
	if (b->n + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		char *np;

		while (cap < b->n + len + 1)
			cap *= 2;
		if (!(np = realloc(b->p, cap))) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, len + 1);
	b->n += len;
}

/* s with & < > " escaped */
static void put_esc(struct page *b, const char *s)
{
	char one[2] = { 0, 0 };

	for (; s && *s; s++) {
		switch (*s) {
		case '&': put(b, "&amp;"); break;
		case '<': put(b, "&lt;"); break;
		case '>': put(b, "&gt;"); break;
		case '"': put(b, "&quot;"); break;
		default: one[0] = *s; put(b, one);
		}
	}
}

struct view {
	int lang;
	const char *when;       /* "05.12.2026 14:00 – 15:00 (Europe/Moscow)" or NULL */
	const char *status;     /* status text or NULL */
};

/* form: 0 none, 1 the cancel button; extra: more of the page (HTML) */
static int send_page_x(struct pin_req *r, int status, const struct view *v,
		const char *head, const char *msg, const char *msg_tail, int form,
		const char *extra)
{
	struct page b = { NULL, 0, 0, 0 };
	int lang = v->lang;

	put(&b, "<!DOCTYPE html>\n<html lang=\"");
	put(&b, lang == PC_MANAGE_EN ? "en" : "ru");
	put(&b, "\"><head><meta charset=\"utf-8\">"
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
		"<meta name=\"robots\" content=\"noindex\"><title>");
	put_esc(&b, text[lang][M_TITLE]);
	put(&b, "</title><style>"
		"body{font:16px/1.5 system-ui,-apple-system,\"Segoe UI\",Roboto,sans-serif;"
		"margin:0;background:#f4f5f7;color:#1d2433}"
		"main{max-width:30rem;margin:0 auto;padding:1.5rem 1rem}"
		".card{background:#fff;border-radius:12px;padding:1.25rem;"
		"box-shadow:0 1px 3px rgba(0,0,0,.12)}"
		"h1{font-size:1.35rem;margin:0 0 .75rem}"
		"dl{margin:0 0 1rem}dt{font-size:.85rem;color:#5b6475}dd{margin:0 0 .5rem}"
		"p{margin:0 0 1rem}"
		"button{display:block;width:100%;font:inherit;font-weight:600;padding:.9rem;"
		"border:0;border-radius:8px;background:#c62828;color:#fff;cursor:pointer}"
		"form.slot{margin:0 0 .6rem}form.slot button{background:#1f5fbf}"
		"a{color:#1f5fbf}"
		".ok{color:#2e7d32}.no{color:#8a1c1c}"
		"</style></head><body><main><div class=\"card\"><h1 class=\"");
	put(&b, status >= 400 ? "no" : status == 200 && !form && !extra ? "ok" : "");
	put(&b, "\" id=\"head\">");
	put_esc(&b, head);
	put(&b, "</h1>");
	if (v->when || v->status) {
		put(&b, "<dl>");
		if (v->when) {
			put(&b, "<dt>");
			put_esc(&b, text[lang][M_WHEN]);
			put(&b, "</dt><dd id=\"when\">");
			put_esc(&b, v->when);
			put(&b, "</dd>");
		}
		if (v->status) {
			put(&b, "<dt>");
			put_esc(&b, text[lang][M_STATUS]);
			put(&b, "</dt><dd id=\"status\">");
			put_esc(&b, v->status);
			put(&b, "</dd>");
		}
		put(&b, "</dl>");
	}
	put(&b, "<p id=\"msg\">");
	put_esc(&b, msg);
	put_esc(&b, msg_tail);
	put(&b, "</p>");
	if (form) {
		/* no action: the POST goes to this very URL (the token) */
		put(&b, "<form method=\"post\"><button type=\"submit\" id=\"confirm\">");
		put_esc(&b, text[lang][M_BUTTON]);
		put(&b, "</button></form>");
	}
	if (extra)
		put(&b, extra);
	put(&b, "</div></main></body></html>\n");
	if (b.oom) {
		free(b.p);
		return PIN_ERR;
	}
	pc_api->set_header(r, "Cache-Control", "no-store");
	pc_api->set_header(r, "Referrer-Policy", "no-referrer");
	pc_api->set_header(r, "X-Robots-Tag", "noindex");
	pc_api->set_header(r, "X-Content-Type-Options", "nosniff");
	pc_api->set_header(r, "Content-Security-Policy", "default-src 'none'; "
		"style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'");
	return pc_api->respond_body(r, status, "text/html; charset=utf-8", b.p, b.n);
}

static int send_page(struct pin_req *r, int status, const struct view *v,
		const char *head, const char *msg, const char *msg_tail, int form)
{
	return send_page_x(r, status, v, head, msg, msg_tail, form, NULL);
}

static void count(const char *method, const char *result)
{
	pc_api->metric_add("calendar_manage_link_requests_total",
			pc_api->sprintf("method=\"%s\",result=\"%s\"", method, result), 1);
}

/* a page without the appointment's details */
static int plain(struct pin_req *r, int status, int lang, enum msg m, const char *result)
{
	struct view v = { lang, NULL, NULL };

	count(pc_api->req_method(r), result);
	return send_page(r, status, &v, text[lang][M_TITLE], text[lang][m], "", 0);
}

/* ---------------------------------------------------------------- common */

/* The token of the path, verified: 0 with *c, or the page was answered
 * (1).  The locale of an expired or wrong-purpose token is still read. */
static int token_of(struct pin_req *r, struct pc_manage_claims *c)
{
	const char *tok = pc_api->req_param(r, "token");
	int rc;

	if (keys.n == 0)
		return plain(r, 503, PC_MANAGE_EN, M_OFF, "off"), 1;
	/* the page does what the token's purpose says */
	rc = pc_manage_verify(&keys, tok, pc_api->now_us() / 1000000, 0, c);
	if (rc == PC_MANAGE_E_EXPIRED)
		return plain(r, 410, c->locale, M_EXPIRED, "expired"), 1;
	if (rc < 0 || (c->purpose != PC_MANAGE_CANCEL && c->purpose != PC_MANAGE_RESCHEDULE))
		return plain(r, 400, rc < 0 ? PC_MANAGE_EN : c->locale, M_BAD, "invalid"), 1;
	return 0;
}

/* 1 when the link was used already, 0 not, PIN_ERR_DB */
static int used(const struct pc_manage_claims *c)
{
	const char *p[2] = { c->appointment_id,
		pc_api->sprintf("%lld", (long long)(int64_t)c->jti) };
	PGresult *res = pc_api->db_exec_prepared("apt_manage_used",
		"SELECT 1 FROM calendar.manage_link_uses "
		"WHERE appointment_id = $1 AND jti = $2::bigint", 2, p);

	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	return PQntuples(res) > 0;
}

/* The appointment's time as the e-mails show it (notify.so's formats), in
 * its own time zone, and its status text: into v. */
static int describe(const char *id, struct view *v)
{
	const char *p[2] = { id, v->lang == PC_MANAGE_EN ? "en" : "ru" };
	PGresult *res = pc_api->db_exec_prepared("apt_manage_when",
		"SELECT CASE WHEN $2 = 'ru' THEN "
		"    to_char(a.start_at AT TIME ZONE a.time_zone, 'DD.MM.YYYY HH24:MI') "
		"  ELSE to_char(a.start_at AT TIME ZONE a.time_zone, "
		"    'Mon FMDD, YYYY FMHH12:MI AM') END "
		"  || ' – ' || CASE WHEN $2 = 'ru' THEN "
		"    to_char(a.end_at AT TIME ZONE a.time_zone, 'HH24:MI') "
		"  ELSE to_char(a.end_at AT TIME ZONE a.time_zone, 'FMHH12:MI AM') END "
		"  || ' (' || a.time_zone || ')', a.status "
		"FROM calendar.appointments a WHERE a.id = $1", 2, p);

	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(res) == 1) {
		v->when = pc_api->strdup(PQgetvalue(res, 0, 0));
		v->status = status_text(v->lang, PQgetvalue(res, 0, 1));
	}
	return 0;
}

/* The page of a refusal rc of apt_end / cd_apt_lock (nothing changed). */
static int refused(struct pin_req *r, int rc, struct view *v, const char *status)
{
	const char *m = pc_api->req_method(r);
	int lang = v->lang;

	if (rc == PC_E_NOT_FOUND)
		return plain(r, 404, lang, M_NOT_FOUND, "not-found");
	if (rc == CD_APT_E_CUTOFF) {
		count(m, "cutoff");
		return send_page(r, 409, v, text[lang][M_TITLE], text[lang][M_CUTOFF], "", 0);
	}
	if (rc == CD_APT_E_SLOT_BOOKED || rc == CD_APT_E_SLOT_UNAVAILABLE ||
	    rc == CD_APT_E_SLOT_NOT_FOUND || rc == CD_APT_E_OTHER_SLOT ||
	    rc == CD_APT_E_LEAD_TIME || rc == PC_E_RANGE) {
		count(m, "slot-gone");
		return send_page_x(r, 409, v, text[lang][M_TITLE], text[lang][M_SLOT_GONE], "",
				0, pc_api->sprintf("<p><a href=\"\" id=\"again\">%s</a></p>",
					text[lang][M_AGAIN]));
	}
	if (rc == CD_APT_E_DUPLICATE || rc == CD_APT_E_LIMIT || rc == CD_APT_E_RATE ||
	    rc == CD_APT_E_AGENT_UNAVAILABLE) {
		count(m, "rules");
		return send_page(r, 409, v, text[lang][M_TITLE],
				text[lang][M_NOT_NOW], "", 0);
	}
	if (rc == PC_E_TRANSITION) {
		count(m, "final");
		return send_page(r, 409, v, text[lang][M_TITLE], text[lang][M_FINAL],
				pc_api->sprintf("%s.", status_text(lang, status)), 0);
	}
	/* PIN_ERR_DB: the host retries a deadlock, else answers 503; any
	 * other: 500 (problem+json, as every route) */
	count(m, "error");
	return rc < 0 ? rc : PIN_ERR;
}

/* Would the investor's cancel be allowed now?  The same rules as the POST,
 * checked on the unlocked row (nothing written). */
static int allowed_now(const PGresult *row, int64_t now_us)
{
	const char *status = PQgetvalue(row, 0, CD_APT_C_STATUS);
	long long cutoff = atoll(PQgetvalue(row, 0, CD_APT_C_CUTOFF));

	if (strcmp(status, "Pending") != 0 && strcmp(status, "Confirmed") != 0)
		return PC_E_TRANSITION;
	if (now_us > pc_col_us(row, 0, CD_APT_C_START) - cutoff * 60 * 1000000LL)
		return CD_APT_E_CUTOFF;
	return 0;
}

/* The reschedule page: the agent's next free times of the appointment's
 * kind (what the showcase offers: Available, an Active agent, at least
 * the booking lead time ahead), each a form to ?slot=<id>. */
static int move_page(struct pin_req *r, struct view *v, const PGresult *row)
{
	const char *p[5] = { PQgetvalue(row, 0, CD_APT_C_AGENT),
		PQgetvalue(row, 0, CD_APT_C_KIND), PQgetvalue(row, 0, CD_APT_C_SLOT),
		pc_api->fmt_time(pc_api->now_us(), pc_api->alloc(40), 40),
		v->lang == PC_MANAGE_EN ? "en" : "ru" };
	PGresult *res = pc_api->db_exec_prepared("apt_manage_slots",
		"SELECT s.id, CASE WHEN $5 = 'ru' THEN "
		"    to_char(s.start_at AT TIME ZONE s.time_zone, 'DD.MM.YYYY HH24:MI') "
		"  ELSE to_char(s.start_at AT TIME ZONE s.time_zone, "
		"    'Mon FMDD, YYYY FMHH12:MI AM') END || ' (' || s.time_zone || ')' "
		"FROM calendar.availability_slots s "
		"WHERE s.status = 'Available' AND s.owner_user_id = $1::uuid "
		"  AND s.kind = $2 AND s.id <> $3::uuid "
		"  AND s.start_at >= $4::timestamptz + interval '60 minutes' "
		"  AND NOT EXISTS (SELECT 1 FROM calendar.user_replicas u "
		"                  WHERE u.user_id = $1::uuid AND u.status <> 'Active') "
		"ORDER BY s.start_at, s.id LIMIT 10", 5, p);
	struct page b = { NULL, 0, 0, 0 };
	char *extra;
	int n, rc;

	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	n = PQntuples(res);
	put(&b, "");
	for (int i = 0; i < n; i++) {
		put(&b, "<form class=\"slot\" method=\"post\" action=\"?slot=");
		put_esc(&b, PQgetvalue(res, i, 0));
		put(&b, "\"><button type=\"submit\">");
		put_esc(&b, PQgetvalue(res, i, 1));
		put(&b, "</button></form>");
	}
	if (b.oom || !(extra = pc_api->strdup(b.p))) {
		free(b.p);
		return PIN_ERR;
	}
	free(b.p);
	count("GET", "shown");
	rc = send_page_x(r, 200, v, text[v->lang][M_MOVE_HEAD],
			text[v->lang][n ? M_MOVE_TEXT : M_MOVE_NONE], "", 0, extra);
	return rc;
}

/* ------------------------------------------------------------------- GET */

int apt_h_manage_get(struct pin_req *r, void *ud)
{
	struct pc_manage_claims c;
	struct cd_apt_scope sc = { NULL, NULL, NULL };
	struct view v = { PC_MANAGE_EN, NULL, NULL };
	PGresult *row;
	int rc;

	(void)ud;
	if (token_of(r, &c))
		return PIN_OK;
	v.lang = c.locale;
	if ((rc = used(&c)) < 0)
		return rc;
	if (rc)
		return plain(r, 410, v.lang, M_USED, "used");
	sc.investor_user_id = c.investor_id;
	if ((rc = cd_apt_fetch(c.appointment_id, &sc, &row)) < 0)
		return refused(r, rc, &v, NULL);
	if ((rc = describe(c.appointment_id, &v)) < 0)
		return rc;
	if ((rc = allowed_now(row, pc_api->now_us())) < 0)
		return refused(r, rc, &v, PQgetvalue(row, 0, CD_APT_C_STATUS));
	if (c.purpose == PC_MANAGE_RESCHEDULE)
		return move_page(r, &v, row);
	count("GET", "shown");
	return send_page(r, 200, &v, text[v.lang][M_CONFIRM_HEAD],
			text[v.lang][M_CONFIRM_TEXT], "", 1);
}

/* ------------------------------------------------------------------ POST */

int apt_h_manage_post(struct pin_req *r, void *ud)
{
	struct cd_apt_end x = APT_INVESTOR_CANCEL;
	struct pc_manage_claims c;
	struct cd_apt_scope sc = { NULL, NULL, NULL };
	struct view v = { PC_MANAGE_EN, NULL, NULL };
	const char *p[5];
	PGresult *locked, *res;
	int64_t now_us = pc_api->now_us();
	int rc;

	const char *slot = NULL, *new_id = NULL;

	(void)ud;
	if (token_of(r, &c))
		return PIN_OK;
	v.lang = c.locale;
	sc.investor_user_id = c.investor_id;
	if (c.purpose == PC_MANAGE_RESCHEDULE) {
		slot = pc_api->req_query(r, "slot");
		if (!slot || !pc_api->is_uuid(slot))
			return plain(r, 400, v.lang, M_PICK, "invalid");
	}
	if (pc_api->db_begin() != 0)
		return PIN_ERR_DB;
	if ((rc = cd_apt_lock(c.appointment_id, &sc, &locked)) < 0) {
		pc_api->db_rollback();
		return refused(r, rc, &v, NULL);
	}
	/* the link's one use, taken under the appointment's lock */
	p[0] = c.appointment_id;
	p[1] = pc_api->sprintf("%lld", (long long)(int64_t)c.jti);
	p[2] = pc_api->fmt_time(now_us, pc_api->alloc(40), 40);
	p[3] = pc_api->sprintf("%lld", (long long)c.expires_s);
	p[4] = slot ? "reschedule" : "cancel";
	res = pc_api->db_exec_prepared("apt_manage_use",
		"INSERT INTO calendar.manage_link_uses "
		"  (appointment_id, jti, purpose, used_at, expires_at) "
		"VALUES ($1, $2::bigint, $5, $3::timestamptz, "
		"  to_timestamp($4::bigint)) ON CONFLICT DO NOTHING", 5, p);
	if (!pc_res_ok(res, PGRES_COMMAND_OK)) {
		pc_api->db_rollback();
		return PIN_ERR_DB;
	}
	if (atoi(PQcmdTuples(res)) == 0) {
		pc_api->db_rollback();
		return plain(r, 410, v.lang, M_USED, "used");
	}
	rc = slot ? apt_reschedule(locked, slot, now_us, &new_id) : apt_end(locked, &x, now_us);
	if (rc < 0) {
		const char *st = pc_api->strdup(PQgetvalue(locked, 0, CD_APT_C_STATUS));
		int drc;

		pc_api->db_rollback();          /* the use is not recorded either */
		if (rc != PIN_ERR_DB && (drc = describe(c.appointment_id, &v)) < 0)
			return drc;
		return refused(r, rc, &v, st);
	}
	if ((rc = describe(new_id ? new_id : c.appointment_id, &v)) < 0 ||
	    (rc = pc_api->db_commit()) != 0) {
		pc_api->db_rollback();
		return PIN_ERR_DB;
	}
	if (new_id) {
		pc_api->log(PIN_LOG_INFO, "appointment moved through a manage link",
				"appointmentId", c.appointment_id, "newAppointmentId", new_id, NULL);
		count("POST", "moved");
		return send_page(r, 200, &v, text[v.lang][M_MOVED_HEAD],
				text[v.lang][M_MOVED_TEXT], "", 0);
	}
	pc_api->log(PIN_LOG_INFO, "appointment cancelled through a manage link",
			"appointmentId", c.appointment_id, NULL);
	count("POST", "cancelled");
	return send_page(r, 200, &v, text[v.lang][M_DONE_HEAD], text[v.lang][M_DONE_TEXT],
			"", 0);
}

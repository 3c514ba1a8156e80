/* sms.c -- SMS through a provider HTTP API (issue 10).
 *
 * One POST per message to sms_url:
 *   Authorization: Bearer <first line of sms_token_file>
 *   Content-Type: application/json
 *   {"to": "+79990000000", "text": "...", "idempotencyKey": "<notification id>"}
 * Answer 2xx -> sent; the provider's id is taken from the JSON body's "id"
 * (or "messageId") when there is one.  4xx (but 408 and 429) -> permanent;
 * 408, 429, 5xx, timeouts and connection errors -> retry (the same
 * idempotencyKey lets the provider drop a duplicate). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include <json-c/json.h>

#include "send.h"

static const struct pin_host_api *api;

void ntf_sms_init(const struct pin_host_api *a)
{
	api = a;
}

int ntf_sms_configured(void)
{
	return *api->config_str("sms_url") != '\0';
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *ud)
{
	struct ntf_xfer *x = ud;
	size_t n = size * nmemb, room = sizeof x->reply - 1 - x->nreply;

	memcpy(x->reply + x->nreply, data, n < room ? n : room);
	x->nreply += n < room ? n : room;
	x->reply[x->nreply] = '\0';
	return n;
}

static int phone_ok(const char *p)
{
	size_t digits = 0;

	if (*p == '+')
		p++;
	for (; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p != ' ' && *p != '-' && *p != '(' && *p != ')')
			return 0;
	}
	return digits >= 5 && digits <= 20;
}

static void sms_clear(struct ntf_xfer *x)
{
	if (x->h)
		curl_easy_reset(x->h);  /* no pointer to the headers or the body left */
	/* the Authorization header is in the list: wiped before it is freed */
	for (struct curl_slist *l = x->list; l; l = l->next)
		memset(l->data, 0, strlen(l->data));
	curl_slist_free_all(x->list);
	x->list = NULL;
	json_object_put(x->json);
	x->json = NULL;
}

int ntf_sms_start(struct ntf_xfer *x, const struct ntf_message *m,
		struct ntf_send_result *res)
{
	char auth[1100] = "", tok[1024];
	const char *tf = api->config_str("sms_token_file");
	struct curl_slist *l;
	CURL *c;
	FILE *f;

	memset(res, 0, sizeof *res);
	if (!phone_ok(m->to)) {
		res->outcome = NTF_PERMANENT;
		snprintf(res->error, sizeof res->error, "NTF_BAD_ADDRESS");
		return 1;
	}
	if (*tf && (f = fopen(tf, "r"))) {
		size_t n = fread(tok, 1, sizeof tok - 1, f);

		fclose(f);
		tok[n] = '\0';
		tok[strcspn(tok, "\r\n")] = '\0';
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok);
		memset(tok, 0, sizeof tok);
	}
	x->json = json_object_new_object();
	json_object_object_add(x->json, "to", json_object_new_string(m->to));
	json_object_object_add(x->json, "text", json_object_new_string(m->body));
	json_object_object_add(x->json, "idempotencyKey", json_object_new_string(m->id));
	x->list = curl_slist_append(NULL, "Content-Type: application/json");
	if (x->list && *auth && (l = curl_slist_append(x->list, auth)))
		x->list = l;
	memset(auth, 0, sizeof auth);
	c = ntf_xfer_handle(x);
	if (!c || !x->list || !x->json) {
		sms_clear(x);
		res->outcome = NTF_RETRY;
		snprintf(res->error, sizeof res->error, "NTF_SMS_LOCAL: out of memory");
		return 1;
	}
	x->nreply = 0;
	x->reply[0] = '\0';
	curl_easy_setopt(c, CURLOPT_URL, api->config_str("sms_url"));
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->list);
	/* not copied: the text lives in x->json until _finish */
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, json_object_to_json_string_ext(x->json,
			JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
			(long)api->config_num("sms_connect_timeout_ms"));
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
			(long)api->config_num("sms_timeout_ms"));
	return 0;
}

void ntf_sms_finish(struct ntf_xfer *x, CURLcode rc, struct ntf_send_result *res)
{
	json_object *reply = NULL, *v;
	long code = 0;

	memset(res, 0, sizeof *res);
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	if (rc == CURLE_OK && code >= 200 && code < 300) {
		res->outcome = NTF_SENT;
		reply = json_tokener_parse(x->reply);
		if ((json_object_object_get_ex(reply, "id", &v) ||
				json_object_object_get_ex(reply, "messageId", &v)) &&
				json_object_is_type(v, json_type_string))
			snprintf(res->provider_id, sizeof res->provider_id, "%s",
					json_object_get_string(v));
	} else if (rc == CURLE_OK && code >= 400 && code < 500 && code != 408 && code != 429) {
		res->outcome = NTF_PERMANENT;
		snprintf(res->error, sizeof res->error, "NTF_SMS_REJECTED: http %ld", code);
	} else {
		res->outcome = NTF_RETRY;
		snprintf(res->error, sizeof res->error, "NTF_SMS_UNAVAILABLE: curl %d %s, http %ld",
				(int)rc, curl_easy_strerror(rc), code);
	}
	json_object_put(reply);
	sms_clear(x);
}

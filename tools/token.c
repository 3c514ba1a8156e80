/*
 * pin-token -- prints an HS256 JWT for the dev stack and tests.
 *
 *   pin-token (--secret S | --secret-file F) [--iss I] [--aud A] --sub UUID
 *             [--tenant UUID] --actor A [--perm P]... [--exp-in SECONDS]
 *             [--nbf-in SECONDS] [--now EPOCH_SECONDS]
 *
 * --secret-file: the file's content is the secret, one trailing newline (LF or
 * CRLF) stripped, matching a jwt_hs256_secret config line.  --exp-in defaults
 * to 3600; --exp-in/--nbf-in may be negative (expired / future tokens for
 * tests).  --now replaces the wall clock (e.g. a shifted dev clock).
 *
 * Standalone: OpenSSL (HMAC, EVP_EncodeBlock) and json-c only.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define MAX_PERMS 64
#define MAX_SECRET 4096

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pin-token (--secret S | --secret-file F) [--iss I] [--aud A]\n"
		"                 --sub UUID [--tenant UUID] --actor ACTOR [--perm P]...\n"
		"                 [--exp-in SECONDS] [--nbf-in SECONDS] [--now EPOCH]\n"
		"actors: agent consultant agency_head pin_manager investor\n");
}

/* base64url without padding; malloc'd */
static char *b64url(const unsigned char *in, size_t n)
{
	char *out;
	size_t i, len;

	out = malloc(4 * ((n + 2) / 3) + 1);
	if (!out)
		return NULL;
	len = (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	while (len > 0 && out[len - 1] == '=')
		len--;
	out[len] = 0;
	for (i = 0; i < len; i++) {
		if (out[i] == '+')
			out[i] = '-';
		else if (out[i] == '/')
			out[i] = '_';
	}
	return out;
}

static int read_secret(const char *path, char *buf, size_t buflen)
{
	FILE *f;
	size_t n;
	int ret = -1;

	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "pin-token: %s: %s\n", path, strerror(errno));
		goto out;
	}
	n = fread(buf, 1, buflen - 1, f);
	if (ferror(f) || !feof(f)) {
		fprintf(stderr, "pin-token: %s: unreadable or too long\n", path);
		goto out;
	}
	buf[n] = 0;
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = 0;
	if (n > 0 && buf[n - 1] == '\r')
		buf[--n] = 0;
	ret = 0;
out:
	if (f)
		fclose(f);
	return ret;
}

static int parse_long(const char *s, long long *v)
{
	char *end;

	errno = 0;
	*v = strtoll(s, &end, 10);
	return (errno || end == s || *end) ? -1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "secret",      required_argument, NULL, 's' },
		{ "secret-file", required_argument, NULL, 'S' },
		{ "iss",         required_argument, NULL, 'i' },
		{ "aud",         required_argument, NULL, 'a' },
		{ "sub",         required_argument, NULL, 'u' },
		{ "tenant",      required_argument, NULL, 't' },
		{ "actor",       required_argument, NULL, 'A' },
		{ "perm",        required_argument, NULL, 'p' },
		{ "exp-in",      required_argument, NULL, 'e' },
		{ "nbf-in",      required_argument, NULL, 'n' },
		{ "now",         required_argument, NULL, 'N' },
		{ "help",        no_argument,       NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	static char secret_buf[MAX_SECRET];
	const char *secret = NULL, *secret_file = NULL, *iss = NULL, *aud = NULL;
	const char *sub = NULL, *tenant = NULL, *actor = NULL;
	const char *perms[MAX_PERMS];
	int nperms = 0, c, i, have_nbf = 0;
	long long exp_in = 3600, nbf_in = 0, now = (long long)time(NULL);
	json_object *hdr = NULL, *pl = NULL, *arr;
	char *h64 = NULL, *p64 = NULL, *s64 = NULL, *input = NULL;
	const char *hs, *ps;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	size_t inlen;
	int ret = 2;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's': secret = optarg; break;
		case 'S': secret_file = optarg; break;
		case 'i': iss = optarg; break;
		case 'a': aud = optarg; break;
		case 'u': sub = optarg; break;
		case 't': tenant = optarg; break;
		case 'A': actor = optarg; break;
		case 'p':
			if (nperms == MAX_PERMS) {
				fprintf(stderr, "pin-token: too many --perm\n");
				goto out;
			}
			perms[nperms++] = optarg;
			break;
		case 'e':
			if (parse_long(optarg, &exp_in) < 0) {
				fprintf(stderr, "pin-token: bad --exp-in\n");
				goto out;
			}
			break;
		case 'n':
			if (parse_long(optarg, &nbf_in) < 0) {
				fprintf(stderr, "pin-token: bad --nbf-in\n");
				goto out;
			}
			have_nbf = 1;
			break;
		case 'N':
			if (parse_long(optarg, &now) < 0) {
				fprintf(stderr, "pin-token: bad --now\n");
				goto out;
			}
			break;
		case 'h':
			usage(stdout);
			ret = 0;
			goto out;
		default:
			usage(stderr);
			goto out;
		}
	}
	if (optind != argc || !sub || !actor || (!secret == !secret_file)) {
		usage(stderr);
		goto out;
	}
	if (secret_file) {
		if (read_secret(secret_file, secret_buf, sizeof(secret_buf)) < 0)
			goto out;
		secret = secret_buf;
	}
	if (!*secret) {
		fprintf(stderr, "pin-token: empty secret\n");
		goto out;
	}
	ret = 1;

	hdr = json_object_new_object();
	pl = json_object_new_object();
	if (!hdr || !pl)
		goto out;
	json_object_object_add(hdr, "alg", json_object_new_string("HS256"));
	json_object_object_add(hdr, "typ", json_object_new_string("JWT"));
	if (iss)
		json_object_object_add(pl, "iss", json_object_new_string(iss));
	if (aud)
		json_object_object_add(pl, "aud", json_object_new_string(aud));
	json_object_object_add(pl, "sub", json_object_new_string(sub));
	if (tenant)
		json_object_object_add(pl, "tenant_id", json_object_new_string(tenant));
	json_object_object_add(pl, "actor", json_object_new_string(actor));
	if (nperms) {
		arr = json_object_new_array();
		for (i = 0; i < nperms; i++)
			json_object_array_add(arr, json_object_new_string(perms[i]));
		json_object_object_add(pl, "permissions", arr);
	}
	json_object_object_add(pl, "iat", json_object_new_int64(now));
	if (have_nbf)
		json_object_object_add(pl, "nbf", json_object_new_int64(now + nbf_in));
	json_object_object_add(pl, "exp", json_object_new_int64(now + exp_in));

	hs = json_object_to_json_string_ext(hdr, JSON_C_TO_STRING_PLAIN |
			JSON_C_TO_STRING_NOSLASHESCAPE);
	ps = json_object_to_json_string_ext(pl, JSON_C_TO_STRING_PLAIN |
			JSON_C_TO_STRING_NOSLASHESCAPE);
	h64 = b64url((const unsigned char *)hs, strlen(hs));
	p64 = b64url((const unsigned char *)ps, strlen(ps));
	if (!h64 || !p64)
		goto out;
	inlen = strlen(h64) + 1 + strlen(p64);
	input = malloc(inlen + 1);
	if (!input)
		goto out;
	snprintf(input, inlen + 1, "%s.%s", h64, p64);
	if (!HMAC(EVP_sha256(), secret, (int)strlen(secret),
			(const unsigned char *)input, inlen, md, &mdlen))
		goto out;
	s64 = b64url(md, mdlen);
	if (!s64)
		goto out;
	printf("%s.%s\n", input, s64);
	ret = 0;
out:
	if (ret == 1)
		fprintf(stderr, "pin-token: failed\n");
	free(input);
	free(h64);
	free(p64);
	free(s64);
	json_object_put(hdr);
	json_object_put(pl);
	return ret;
}

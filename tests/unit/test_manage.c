/* test_manage.c -- sdk/manage.c: the investors' manage-link tokens (issue
 * 32 item 3).  A token signed with the key verifies and says what was
 * signed; a changed character, another key, an expired token or another
 * purpose is refused, each with its own answer; a rotated key file (new
 * line first) still verifies the links of the old key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "sdk/manage.h"
#include "suites.h"

#define SECRET_A "0123456789abcdef0123456789abcdef-A"
#define SECRET_B "0123456789abcdef0123456789abcdef-B"

static struct pc_manage_claims claims(void)
{
	struct pc_manage_claims c;

	memset(&c, 0, sizeof c);
	c.purpose = PC_MANAGE_CANCEL;
	strcpy(c.appointment_id, "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
	strcpy(c.investor_id, "0190ffff-0000-7000-8000-00000000beef");
	c.expires_s = 1796000000;
	c.jti = 0x0123456789abcdefULL;
	c.locale = PC_MANAGE_EN;
	return c;
}

static void keys_of(struct pc_manage_keys *k, const char *secret)
{
	memset(k, 0, sizeof *k);
	ck_assert_int_eq(pc_manage_key_add(k, secret, strlen(secret)), 0);
}

START_TEST(round_trip)
{
	struct pc_manage_keys k;
	struct pc_manage_claims c = claims(), got;
	char tok[PC_MANAGE_TOKEN_LEN + 1];

	keys_of(&k, SECRET_A);
	ck_assert_int_eq(pc_manage_sign(&k, &c, tok, sizeof tok), 0);
	ck_assert_uint_eq(strlen(tok), PC_MANAGE_TOKEN_LEN);
	ck_assert_int_eq(strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			"0123456789-_"), PC_MANAGE_TOKEN_LEN);
	ck_assert_int_eq(pc_manage_verify(&k, tok, c.expires_s - 1, PC_MANAGE_CANCEL, &got), 0);
	ck_assert_str_eq(got.appointment_id, c.appointment_id);
	ck_assert_str_eq(got.investor_id, c.investor_id);
	ck_assert_int_eq(got.expires_s, c.expires_s);
	ck_assert(got.jti == c.jti);
	ck_assert_int_eq(got.locale, PC_MANAGE_EN);
	ck_assert_int_eq(got.purpose, PC_MANAGE_CANCEL);
	/* purpose 0: any */
	ck_assert_int_eq(pc_manage_verify(&k, tok, 0, 0, &got), 0);
}
END_TEST

START_TEST(tampered)
{
	struct pc_manage_keys k;
	struct pc_manage_claims c = claims(), got;
	char tok[PC_MANAGE_TOKEN_LEN + 1], bad[PC_MANAGE_TOKEN_LEN + 1];

	keys_of(&k, SECRET_A);
	ck_assert_int_eq(pc_manage_sign(&k, &c, tok, sizeof tok), 0);
	/* every single character changed: never valid */
	for (int i = 0; i < PC_MANAGE_TOKEN_LEN; i++) {
		strcpy(bad, tok);
		bad[i] = bad[i] == 'A' ? 'B' : 'A';
		ck_assert_int_eq(pc_manage_verify(&k, bad, 0, PC_MANAGE_CANCEL, &got),
				i < 2 ? PC_MANAGE_E_MALFORMED : PC_MANAGE_E_SIGNATURE);
	}
	/* another appointment id signed by someone without the key */
	{
		struct pc_manage_keys other;
		struct pc_manage_claims c2 = c;

		keys_of(&other, SECRET_B);
		strcpy(c2.appointment_id, "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c");
		ck_assert_int_eq(pc_manage_sign(&other, &c2, bad, sizeof bad), 0);
		ck_assert_int_eq(pc_manage_verify(&k, bad, 0, 0, &got), PC_MANAGE_E_SIGNATURE);
	}
	/* length, alphabet, empty */
	ck_assert_int_eq(pc_manage_verify(&k, "", 0, 0, &got), PC_MANAGE_E_MALFORMED);
	strcpy(bad, tok);
	bad[10] = '=';
	ck_assert_int_eq(pc_manage_verify(&k, bad, 0, 0, &got), PC_MANAGE_E_MALFORMED);
	bad[PC_MANAGE_TOKEN_LEN - 1] = '\0';
	ck_assert_int_eq(pc_manage_verify(&k, bad, 0, 0, &got), PC_MANAGE_E_MALFORMED);
	ck_assert_int_eq(pc_manage_verify(&k, NULL, 0, 0, &got), PC_MANAGE_E_MALFORMED);
}
END_TEST

START_TEST(expired_and_purpose)
{
	struct pc_manage_keys k;
	struct pc_manage_claims c = claims(), got;
	char tok[PC_MANAGE_TOKEN_LEN + 1];

	keys_of(&k, SECRET_A);
	ck_assert_int_eq(pc_manage_sign(&k, &c, tok, sizeof tok), 0);
	ck_assert_int_eq(pc_manage_verify(&k, tok, c.expires_s, PC_MANAGE_CANCEL, &got),
			PC_MANAGE_E_EXPIRED);
	ck_assert_str_eq(got.appointment_id, c.appointment_id);     /* still readable */
	ck_assert_int_eq(pc_manage_verify(&k, tok, 0, PC_MANAGE_RESCHEDULE, &got),
			PC_MANAGE_E_PURPOSE);
	/* out-of-range claims are not signed */
	c.expires_s = 0x100000000LL;
	ck_assert_int_eq(pc_manage_sign(&k, &c, tok, sizeof tok), -1);
	c = claims();
	strcpy(c.investor_id, "not-a-uuid");
	ck_assert_int_eq(pc_manage_sign(&k, &c, tok, sizeof tok), -1);
}
END_TEST

START_TEST(key_file_rotation)
{
	char path[] = "/tmp/pin-manage-keyXXXXXX", err[256];
	struct pc_manage_keys old, rotated;
	struct pc_manage_claims c = claims(), got;
	char tok[PC_MANAGE_TOKEN_LEN + 1], tok2[PC_MANAGE_TOKEN_LEN + 1];
	int fd = mkstemp(path);
	FILE *fp;

	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_nonnull(fp = fdopen(fd, "w"));
	fprintf(fp, "%s\n", SECRET_A);
	fclose(fp);
	ck_assert_int_eq(pc_manage_keys_load(path, &old, err, sizeof err), 0);
	ck_assert_int_eq(pc_manage_sign(&old, &c, tok, sizeof tok), 0);

	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	fprintf(fp, "# rotated\n%s\n\n%s\n", SECRET_B, SECRET_A);
	fclose(fp);
	ck_assert_int_eq(pc_manage_keys_load(path, &rotated, err, sizeof err), 0);
	ck_assert_int_eq(rotated.n, 2);
	/* the old link still verifies; a new one is signed with the new key */
	ck_assert_int_eq(pc_manage_verify(&rotated, tok, 0, 0, &got), 0);
	ck_assert_int_eq(pc_manage_sign(&rotated, &c, tok2, sizeof tok2), 0);
	ck_assert_str_ne(tok, tok2);
	ck_assert_int_eq(pc_manage_verify(&old, tok2, 0, 0, &got), PC_MANAGE_E_SIGNATURE);

	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	fprintf(fp, "short\n");
	fclose(fp);
	ck_assert_int_eq(pc_manage_keys_load(path, &rotated, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "at least 32"));
	unlink(path);
	ck_assert_int_eq(pc_manage_keys_load(path, &rotated, err, sizeof err), -1);
}
END_TEST

Suite *make_manage_suite(void)
{
	Suite *s = suite_create("manage");
	TCase *tc = tcase_create("token");

	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, tampered);
	tcase_add_test(tc, expired_and_purpose);
	tcase_add_test(tc, key_file_rotation);
	suite_add_tcase(s, tc);
	return s;
}

/* test_config.c -- pin_config_*: file, PIN_<KEY> environment, flags.
 *
 * Expectations (where core.h leaves room):
 *  - file lines "key = value": '#' comment lines and blank lines skipped,
 *    key and value trimmed, the value is everything after the first '='
 *    (so DSNs with '=' work);
 *  - a line without '=' makes pin_config_load return -1 (logged), and so
 *    does a missing file;
 *  - precedence: pin_config_set (flags) > PIN_<KEY> env > file > default;
 *    the env name is PIN_ + key upper-cased with '.' and '-' as '_';
 *  - pin_config_int: base-10 whole string, else the default;
 *    pin_config_bool: true/yes/on/1, false/no/off/0 (any case), else default.
 */
#include <errno.h>
#include <grp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <unistd.h>

#include <check.h>

#include "core.h"
#include "api.h"
#include "worker.h"
#include "suites.h"

static char path[64];

static void write_conf(const char *text)
{
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "/tmp/pin-conf-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void setup(void)
{
	path[0] = 0;
	pin_config_free();
	unsetenv("PIN_PG_DSN");
	unsetenv("PIN_THREADS");
	unsetenv("PIN_ONLY_IN_ENV");
	unsetenv("PIN_JOB_REMINDER_DISPATCH_INTERVAL_MS");
}

static void teardown(void)
{
	if (path[0])
		unlink(path);
	pin_config_free();
}

static const char *CONF =
	"# pin-host test config\n"
	"\n"
	"pg_dsn =   host=/tmp dbname=pin user=pin   \n"
	"   threads=4\n"
	"\t# indented comment\n"
	"listen = 127.0.0.1:9000\n"
	"empty =\n"
	"job.reminder-dispatch.interval_ms = 30000\n"
	"flag_yes = yes\n"
	"\n";

START_TEST(test_load_file)
{
	write_conf(CONF);
	ck_assert_int_eq(pin_config_load(path), 0);
	ck_assert_str_eq(pin_config_get("pg_dsn", "x"), "host=/tmp dbname=pin user=pin");
	ck_assert_str_eq(pin_config_get("threads", "x"), "4");
	ck_assert_str_eq(pin_config_get("listen", "x"), "127.0.0.1:9000");
	ck_assert_str_eq(pin_config_get("job.reminder-dispatch.interval_ms", "x"), "30000");
	/* an empty value is a value (""), an unknown key gets the default */
	ck_assert_str_eq(pin_config_get("empty", "x"), "");
	ck_assert_str_eq(pin_config_get("nope", "dflt"), "dflt");
	ck_assert_ptr_null(pin_config_get("nope", NULL));
	/* comments are not keys */
	ck_assert_ptr_null(pin_config_get("# pin-host test config", NULL));
	ck_assert_ptr_null(pin_config_get("#", NULL));
}
END_TEST

/* an instance file includes the common file (relative to its own dir);
 * lines after the include win, a missing include fails the load */
START_TEST(test_include)
{
	char dir[] = "/tmp/pin-inc-XXXXXX", common[128], inst[128], bad[128];
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(common, sizeof common, "%s/pin-host.conf", dir);
	snprintf(inst, sizeof inst, "%s/api.conf", dir);
	snprintf(bad, sizeof bad, "%s/bad.conf", dir);
	f = fopen(common, "w");
	fputs("pg_dsn = dbname=pin\nplugins = all\nthreads = 2\n", f);
	fclose(f);
	f = fopen(inst, "w");
	fputs("threads = 9\ninclude = pin-host.conf\nplugins = calendar,slots\n", f);
	fclose(f);
	f = fopen(bad, "w");
	fputs("include = missing.conf\n", f);
	fclose(f);
	ck_assert_int_eq(pin_config_load(inst), 0);
	ck_assert_str_eq(pin_config_get("pg_dsn", "x"), "dbname=pin");
	ck_assert_str_eq(pin_config_get("plugins", "x"), "calendar,slots");
	ck_assert_str_eq(pin_config_get("threads", "x"), "2");
	pin_config_free();
	ck_assert_int_eq(pin_config_load(bad), -1);
	unlink(common);
	unlink(inst);
	unlink(bad);
	rmdir(dir);
}
END_TEST

/* socket_mode (octal, default 0660) is applied; a bad mode or an unknown
 * socket_group refuses */
START_TEST(test_socket_perms)
{
	char sp[] = "/tmp/pin-sock-XXXXXX";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	ck_assert_ptr_nonnull(mkdtemp(sp));
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/s", sp);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	ck_assert_int_eq(pin_config_socket_perms(sa.sun_path), 0);
	ck_assert_int_eq(stat(sa.sun_path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0660);
	pin_config_set("socket_mode", "0600");
	ck_assert_int_eq(pin_config_socket_perms(sa.sun_path), 0);
	ck_assert_int_eq(stat(sa.sun_path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	pin_config_set("socket_mode", "0968");
	ck_assert_int_eq(pin_config_socket_perms(sa.sun_path), -1);
	pin_config_set("socket_mode", "0660");
	pin_config_set("socket_group", "no-such-group-pin");
	ck_assert_int_eq(pin_config_socket_perms(sa.sun_path), -1);
	close(fd);
	unlink(sa.sun_path);
	rmdir(sp);
}
END_TEST

/* The packaged units' SystemCallFilter=~@privileged: every chown fails with
 * EPERM.  Installed in a child process only (it cannot be undone). */
static int deny_chown(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __NR_chown
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_chown, 3, 0),
#else
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fchownat, 3, 0),
#endif
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fchownat, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fchown, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* socket_group naming the group the socket already has (a setgid runtime
 * directory of that group, as the packages' /run/pin-calendar) needs no
 * chown: the API host starts under its unit's syscall filter.  Another
 * group still needs one, and the filter refuses it. */
START_TEST(test_socket_group_without_chown)
{
	char sp[] = "/tmp/pin-sock-XXXXXX";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	struct group *own, *other = NULL;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0), status;
	pid_t pid;

	ck_assert_ptr_nonnull(mkdtemp(sp));
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/s", sp);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	ck_assert_int_eq(stat(sa.sun_path, &st), 0);
	ck_assert_ptr_nonnull(own = getgrgid(st.st_gid));
	{
		char *own_name = strdup(own->gr_name);

		setgrent();
		while ((other = getgrent()) && other->gr_gid == st.st_gid)
			;
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			int rc_own, rc_other = -1;

			if (deny_chown() != 0)
				_exit(3);
			if (chown(sa.sun_path, (uid_t)-1, st.st_gid) == 0 || errno != EPERM)
				_exit(4);   /* the filter is not in force */
			pin_config_set("socket_group", own_name);
			rc_own = pin_config_socket_perms(sa.sun_path);
			if (other) {
				pin_config_set("socket_group", other->gr_name);
				rc_other = pin_config_socket_perms(sa.sun_path);
			}
			_exit(rc_own == 0 && rc_other == -1 ? 0 : rc_own != 0 ? 1 : 2);
		}
		endgrent();
		free(own_name);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			"child: %d (1: own group refused, 2: other group not refused, 3/4: no filter)",
			WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	close(fd);
	unlink(sa.sun_path);
	rmdir(sp);
}
END_TEST

START_TEST(test_load_bad_line)
{
	write_conf("threads = 4\nthis line has no equals sign\nlisten = x\n");
	ck_assert_int_eq(pin_config_load(path), -1);
}
END_TEST

START_TEST(test_load_missing)
{
	ck_assert_int_eq(pin_config_load("/nonexistent/pin-host.conf"), -1);
}
END_TEST

START_TEST(test_env_overrides_file)
{
	write_conf(CONF);
	ck_assert_int_eq(setenv("PIN_PG_DSN", "host=env", 1), 0);
	ck_assert_int_eq(pin_config_load(path), 0);
	ck_assert_str_eq(pin_config_get("pg_dsn", "x"), "host=env");
	/* other keys still from the file */
	ck_assert_str_eq(pin_config_get("threads", "x"), "4");
	/* a key known only to the environment */
	ck_assert_int_eq(setenv("PIN_ONLY_IN_ENV", "e", 1), 0);
	ck_assert_str_eq(pin_config_get("only_in_env", "x"), "e");
	/* dots and dashes become underscores */
	ck_assert_int_eq(setenv("PIN_JOB_REMINDER_DISPATCH_INTERVAL_MS", "5", 1), 0);
	ck_assert_int_eq(pin_config_int("job.reminder-dispatch.interval_ms", 0), 5);
}
END_TEST

START_TEST(test_flag_overrides_all)
{
	write_conf(CONF);
	ck_assert_int_eq(setenv("PIN_PG_DSN", "host=env", 1), 0);
	ck_assert_int_eq(pin_config_load(path), 0);
	ck_assert_int_eq(pin_config_set("pg_dsn", "host=flag"), 0);
	ck_assert_str_eq(pin_config_get("pg_dsn", "x"), "host=flag");
	ck_assert_int_eq(pin_config_set("threads", "9"), 0);
	ck_assert_int_eq(pin_config_int("threads", 0), 9);
	/* a later set replaces an earlier one */
	ck_assert_int_eq(pin_config_set("pg_dsn", "host=flag2"), 0);
	ck_assert_str_eq(pin_config_get("pg_dsn", "x"), "host=flag2");
	/* also for keys no file mentions */
	ck_assert_int_eq(pin_config_set("new_key", "v"), 0);
	ck_assert_str_eq(pin_config_get("new_key", "x"), "v");
}
END_TEST

START_TEST(test_free_forgets)
{
	ck_assert_int_eq(pin_config_set("k", "v"), 0);
	pin_config_free();
	ck_assert_str_eq(pin_config_get("k", "dflt"), "dflt");
	/* usable again after free */
	ck_assert_int_eq(pin_config_set("k", "w"), 0);
	ck_assert_str_eq(pin_config_get("k", "dflt"), "w");
}
END_TEST

START_TEST(test_int)
{
	pin_config_set("a", "42");
	pin_config_set("b", "-5");
	pin_config_set("c", "abc");
	pin_config_set("d", "12abc");
	pin_config_set("e", "");
	pin_config_set("f", "9223372036854775807");
	pin_config_set("g", "99999999999999999999");
	ck_assert_int_eq(pin_config_int("a", 7), 42);
	ck_assert_int_eq(pin_config_int("b", 7), -5);
	ck_assert_int_eq(pin_config_int("c", 7), 7);
	ck_assert_int_eq(pin_config_int("d", 7), 7);
	ck_assert_int_eq(pin_config_int("e", 7), 7);
	ck_assert_int_eq(pin_config_int("f", 7), 9223372036854775807LL);
	ck_assert_int_eq(pin_config_int("g", 7), 7);
	ck_assert_int_eq(pin_config_int("missing", 7), 7);
}
END_TEST

/* reading an integer leaves the stored value as it was (config values are
 * read by every thread at once; some point into the environment) */
START_TEST(test_int_does_not_modify)
{
	pin_config_set("t", "12  ");
	ck_assert_int_eq(pin_config_int("t", 7), 12);
	ck_assert_str_eq(pin_config_get("t", NULL), "12  ");
	setenv("PIN_TEST_INT_ENV", "34 ", 1);
	ck_assert_int_eq(pin_config_int("test_int_env", 7), 34);
	ck_assert_str_eq(getenv("PIN_TEST_INT_ENV"), "34 ");
	unsetenv("PIN_TEST_INT_ENV");
	pin_config_set("u", "  ");
	ck_assert_int_eq(pin_config_int("u", 7), 7);
}
END_TEST

START_TEST(test_int_from_file)
{
	write_conf(CONF);
	ck_assert_int_eq(pin_config_load(path), 0);
	ck_assert_int_eq(pin_config_int("threads", 1), 4);
	ck_assert_int_eq(pin_config_int("job.reminder-dispatch.interval_ms", 1), 30000);
	ck_assert(pin_config_bool("flag_yes", false));
}
END_TEST

START_TEST(test_bool)
{
	static const char *yes[] = { "true", "yes", "on", "1", "TRUE", "Yes" };
	static const char *no[] = { "false", "no", "off", "0", "FALSE", "No" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		pin_config_set("b", yes[i]);
		ck_assert_msg(pin_config_bool("b", false), "%s", yes[i]);
	}
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		pin_config_set("b", no[i]);
		ck_assert_msg(!pin_config_bool("b", true), "%s", no[i]);
	}
	pin_config_set("b", "maybe");
	ck_assert(pin_config_bool("b", true));
	ck_assert(!pin_config_bool("b", false));
	ck_assert(pin_config_bool("missing", true));
	ck_assert(!pin_config_bool("missing", false));
}
END_TEST

Suite *make_config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_load_file);
	tcase_add_test(tc, test_load_bad_line);
	tcase_add_test(tc, test_include);
	tcase_add_test(tc, test_socket_perms);
	tcase_add_test(tc, test_socket_group_without_chown);
	tcase_add_test(tc, test_load_missing);
	tcase_add_test(tc, test_env_overrides_file);
	tcase_add_test(tc, test_flag_overrides_all);
	tcase_add_test(tc, test_free_forgets);
	tcase_add_test(tc, test_int);
	tcase_add_test(tc, test_int_does_not_modify);
	tcase_add_test(tc, test_int_from_file);
	tcase_add_test(tc, test_bool);
	suite_add_tcase(s, tc);
	return s;
}

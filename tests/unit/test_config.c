/* test_config.c -- declared configuration (config.c, config_keys.c): file,
 * PIN_<KEY> environment, flags, each checked against the declared keys.
 *
 * Expectations (where core.h leaves room):
 *  - file lines "key = value": '#' comment lines and blank lines skipped,
 *    key and value trimmed, the value is everything after the first '='
 *    (so DSNs with '=' work); a line without '=' makes pin_config_load
 *    return -1 (logged), and so does a missing file;
 *  - precedence: pin_config_set (flags) > PIN_<KEY> env > file > declared
 *    default; the env name is PIN_ + key upper-cased with '.' and '-' as
 *    '_'; the first source that is set decides, and an empty value there
 *    means the default;
 *  - pin_config_check refuses (counts an error for) an unknown key, naming
 *    file:line and key and a near miss ("did you mean"), a value of the
 *    wrong type or out of range in a file, a flag or a PIN_<KEY> variable;
 *    unknown PIN_* variables are ignored (--check-config warns about near
 *    misses); while a plugin of ABI < 1.7 is known, an unknown key that is
 *    no near miss is a warning;
 *  - the ABI's config_get/config_int: the declared default replaces def;
 *  - --print-config names every value's source and redacts secrets and DSN
 *    passwords.
 */
#include "config.h"
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

extern const struct pin_config_key pin_config_host_keys[];

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
	unsetenv("PIN_RELAY_BATCH");
	unsetenv("PIN_METRICS_LISTEN");
	unsetenv("PIN_RELAY_SHRADS");
	unsetenv("PIN_TESTP_BATCH");
}

static void teardown(void)
{
	if (path[0])
		unlink(path);
	pin_config_free();
}

/* pin_config_check's human lines (--check-config) and error count */
static int check_text(unsigned mode, char **out)
{
	size_t len = 0;
	FILE *f = open_memstream(out, &len);
	int n;

	ck_assert_ptr_nonnull(f);
	n = pin_config_check(mode, f);
	fclose(f);
	return n;
}

static char *print_text(unsigned mode)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	ck_assert_ptr_nonnull(f);
	pin_config_print(f, mode);
	fclose(f);
	return out;
}

static const char *CONF =
	"# pin-host test config\n"
	"\n"
	"pg_dsn =   host=/tmp dbname=pin user=pin   \n"
	"   threads=4\n"
	"\t# indented comment\n"
	"listen = 127.0.0.1:9000\n"
	"socket_group =\n"
	"relay_log_published = no\n"
	"\n";

START_TEST(test_load_file)
{
	char *out = NULL;

	write_conf(CONF);
	ck_assert_int_eq(pin_config_load(path), 0);
	ck_assert_int_eq(check_text(0, &out), 0);
	ck_assert_str_eq(out, "");
	free(out);
	ck_assert_str_eq(pin_config_str("pg_dsn"), "host=/tmp dbname=pin user=pin");
	ck_assert_int_eq(pin_config_int("threads"), 4);
	ck_assert_str_eq(pin_config_str("listen"), "127.0.0.1:9000");
	ck_assert(!pin_config_bool("relay_log_published"));
	/* an empty value and a key the file does not set: the declared default */
	ck_assert_str_eq(pin_config_str("socket_group"), "");
	ck_assert_int_eq(pin_config_int("relay_batch"), 1000);
	ck_assert_str_eq(pin_config_str("api_server"), "loop");
	ck_assert_int_eq(pin_config_int("socket_mode"), 0660);
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
	ck_assert_int_eq(pin_config_check(0, NULL), 0);
	ck_assert_str_eq(pin_config_str("pg_dsn"), "dbname=pin");
	ck_assert_str_eq(pin_config_str("plugins"), "calendar,slots");
	ck_assert_int_eq(pin_config_int("threads"), 2);
	pin_config_free();
	ck_assert_int_eq(pin_config_load(bad), -1);
	unlink(common);
	unlink(inst);
	unlink(bad);
	rmdir(dir);
}
END_TEST

/* socket_mode (octal, default 0660) is applied; a bad mode is refused by
 * the check, an unknown socket_group when applied */
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
	ck_assert_int_eq(pin_config_check(PIN_CFG_API, NULL), 1);
	pin_config_set("socket_mode", "01777");
	ck_assert_int_eq(pin_config_check(PIN_CFG_API, NULL), 1);
	pin_config_set("socket_mode", "0660");
	pin_config_set("socket_group", "no-such-group-pin");
	ck_assert_int_eq(pin_config_check(PIN_CFG_API, NULL), 0);
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
	ck_assert_int_eq(pin_config_check(0, NULL), 0);
	ck_assert_str_eq(pin_config_str("pg_dsn"), "host=env");
	/* other keys still from the file */
	ck_assert_int_eq(pin_config_int("threads"), 4);
	/* an empty variable is set: the default, not the file's line */
	ck_assert_int_eq(setenv("PIN_THREADS", "", 1), 0);
	ck_assert_int_eq(pin_config_check(0, NULL), 0);
	ck_assert_int_eq(pin_config_int("threads"), 0);
	/* dots and dashes become underscores (a plugin's key) */
	{
		static const struct pin_config_key k[] = {
			{ "job.testp-job.batch", PIN_CFG_INT, "7", PIN_CFG_WORKER, 0, 1, 100,
			  NULL, "rows", "jobs", "rows per batch" },
			{ NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL, NULL }
		};
		char err[200];

		ck_assert_int_eq(pin_config_declare("testp", k, sizeof k[0], err, sizeof err), 0);
		ck_assert_int_eq(setenv("PIN_JOB_TESTP_JOB_BATCH", "5", 1), 0);
		ck_assert_int_eq(pin_config_check(0, NULL), 0);
		ck_assert_int_eq(pin_config_int("job.testp-job.batch"), 5);
		unsetenv("PIN_JOB_TESTP_JOB_BATCH");
	}
}
END_TEST

START_TEST(test_flag_overrides_all)
{
	write_conf(CONF);
	ck_assert_int_eq(setenv("PIN_PG_DSN", "host=env", 1), 0);
	ck_assert_int_eq(pin_config_load(path), 0);
	ck_assert_int_eq(pin_config_set("pg_dsn", "host=flag"), 0);
	ck_assert_str_eq(pin_config_str("pg_dsn"), "host=flag");
	ck_assert_int_eq(pin_config_set("threads", "9"), 0);
	ck_assert_int_eq(pin_config_int("threads"), 9);
	/* a later set replaces an earlier one */
	ck_assert_int_eq(pin_config_set("pg_dsn", "host=flag2"), 0);
	ck_assert_str_eq(pin_config_str("pg_dsn"), "host=flag2");
	ck_assert_int_eq(pin_config_check(0, NULL), 0);
	/* NULL unsets the flag: the environment again */
	ck_assert_int_eq(pin_config_set("pg_dsn", NULL), 0);
	ck_assert_str_eq(pin_config_str("pg_dsn"), "host=env");
}
END_TEST

START_TEST(test_free_forgets)
{
	ck_assert_int_eq(pin_config_set("threads", "3"), 0);
	pin_config_free();
	ck_assert_int_eq(pin_config_int("threads"), 0);
	/* usable again after free */
	ck_assert_int_eq(pin_config_set("threads", "5"), 0);
	ck_assert_int_eq(pin_config_int("threads"), 5);
}
END_TEST

/* values: whole integers within the bounds; trailing blanks (the
 * environment's) are fine and not modified */
START_TEST(test_int)
{
	pin_config_set("relay_batch", "42");
	ck_assert_int_eq(pin_config_check(0, NULL), 0);
	ck_assert_int_eq(pin_config_int("relay_batch"), 42);
	pin_config_set("clock_offset_s", "-5");
	ck_assert_int_eq(pin_config_check(0, NULL), 0);
	ck_assert_int_eq(pin_config_int("clock_offset_s"), -5);
	static const char *bad[] = { "abc", "12abc", "99999999999999999999", "0", "100001",
		"1.5" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		pin_config_set("relay_batch", bad[i]);
		ck_assert_msg(pin_config_check(0, NULL) == 1, "%s accepted", bad[i]);
		/* unchecked reads fall back to the default */
		ck_assert_int_eq(pin_config_int("relay_batch"), 1000);
	}
	pin_config_set("relay_batch", NULL);
	setenv("PIN_RELAY_BATCH", "34 ", 1);
	ck_assert_int_eq(pin_config_check(0, NULL), 0);
	ck_assert_int_eq(pin_config_int("relay_batch"), 34);
	ck_assert_str_eq(getenv("PIN_RELAY_BATCH"), "34 ");
}
END_TEST

START_TEST(test_bool)
{
	static const char *yes[] = { "true", "yes", "on", "1", "TRUE", "Yes" };
	static const char *no[] = { "false", "no", "off", "0", "FALSE", "No" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		pin_config_set("relay_log_published", yes[i]);
		ck_assert_int_eq(pin_config_check(0, NULL), 0);
		ck_assert_msg(pin_config_bool("relay_log_published"), "%s", yes[i]);
	}
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		pin_config_set("relay_log_published", no[i]);
		ck_assert_int_eq(pin_config_check(0, NULL), 0);
		ck_assert_msg(!pin_config_bool("relay_log_published"), "%s", no[i]);
	}
	pin_config_set("relay_log_published", "maybe");
	ck_assert_int_eq(pin_config_check(0, NULL), 1);
	/* the declared default (true) */
	ck_assert(pin_config_bool("relay_log_published"));
}
END_TEST

/* the operator trap: a typo is refused with file, line, key and a
 * suggestion */
/* rewrites the file at path in place (a reload re-reads the same name) */
static void rewrite_conf(const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static int apply_calls, apply_fails;

static int apply_hook(void)
{
	apply_calls++;
	return apply_fails ? -1 : 0;
}

/* SIGHUP's reload: reloadable keys change, restart-only keys keep their
 * running value and are counted, a bad file or a refusing component leaves
 * everything as it was */
START_TEST(test_reload)
{
	struct pin_config_reload_result r;
	const char *before;

	write_conf("log_level = info\nthreads = 4\nconsumer_backoff_max_ms = 60000\n");
	ck_assert_int_eq(pin_config_load(path), 0);
	ck_assert_int_eq(pin_config_check(PIN_CFG_WORKER | PIN_CFG_API, NULL), 0);
	before = pin_config_str("log_level");
	ck_assert_str_eq(before, "info");
	ck_assert_uint_eq(pin_config_generation(), 1);

	rewrite_conf("log_level = debug\nthreads = 8\nconsumer_backoff_max_ms = 5000\n");
	ck_assert_int_eq(pin_config_reload(path, PIN_CFG_API | PIN_CFG_WORKER,
			apply_hook, &r), 0);
	ck_assert_int_eq(apply_calls, 1);
	ck_assert_int_eq(r.applied, 2);
	ck_assert_int_eq(r.restart_only, 1);
	ck_assert_uint_eq(r.generation, 2);
	ck_assert_str_eq(pin_config_str("log_level"), "debug");
	ck_assert_int_eq(pin_config_int("consumer_backoff_max_ms"), 5000);
	ck_assert_int_eq(pin_config_int("threads"), 4);       /* needs a restart */
	/* a value read before the reload is still readable */
	ck_assert_str_eq(before, "info");

	/* an unknown key: refused whole, nothing changes */
	rewrite_conf("log_level = warn\nconsumer_backof_max_ms = 1\n");
	ck_assert_int_eq(pin_config_reload(path, PIN_CFG_API | PIN_CFG_WORKER,
			apply_hook, &r), -1);
	ck_assert_ptr_nonnull(strstr(r.why, "invalid"));
	ck_assert_uint_eq(r.generation, 2);
	ck_assert_str_eq(pin_config_str("log_level"), "debug");
	ck_assert_int_eq(apply_calls, 1);
	/* an invalid value */
	rewrite_conf("log_level = loud\n");
	ck_assert_int_eq(pin_config_reload(path, PIN_CFG_API | PIN_CFG_WORKER,
			apply_hook, &r), -1);
	ck_assert_str_eq(pin_config_str("log_level"), "debug");
	/* a missing file */
	unlink(path);
	ck_assert_int_eq(pin_config_reload(path, PIN_CFG_API | PIN_CFG_WORKER,
			apply_hook, &r), -1);
	ck_assert_str_eq(pin_config_str("log_level"), "debug");

	/* the component the values go to refuses them: all go back */
	rewrite_conf("log_level = error\nconsumer_backoff_max_ms = 7000\n");
	apply_fails = 1;
	ck_assert_int_eq(pin_config_reload(path, PIN_CFG_API | PIN_CFG_WORKER,
			apply_hook, &r), -1);
	ck_assert_str_eq(pin_config_str("log_level"), "debug");
	ck_assert_int_eq(pin_config_int("consumer_backoff_max_ms"), 5000);
	ck_assert_uint_eq(pin_config_generation(), 2);
	apply_fails = 0;

	/* a key removed from the file goes back to its default */
	rewrite_conf("threads = 4\n");
	ck_assert_int_eq(pin_config_reload(path, PIN_CFG_API | PIN_CFG_WORKER,
			NULL, &r), 0);
	ck_assert_str_eq(pin_config_str("log_level"), "info");
	ck_assert_int_eq(pin_config_int("consumer_backoff_max_ms"), 60000);
	ck_assert_int_eq(r.restart_only, 0);
	ck_assert_uint_eq(r.generation, 3);
}
END_TEST

START_TEST(test_typo_refused)
{
	char *out = NULL, want[200];

	write_conf("pg_dsn = dbname=pin\ndb_concurency = 8\nsmtp_ulr = smtp://x\n"
		"relay_shrads = 2\nincldue = x.conf\nzzz_unrelated = 1\n");
	ck_assert_int_eq(pin_config_load(path), 0);
	ck_assert_int_eq(check_text(0, &out), 5);
	snprintf(want, sizeof want, "[error] unknown key \"db_concurency\" in %s:2 "
		"(did you mean \"db_concurrency\"?)", path);
	ck_assert_msg(strstr(out, want), "%s", out);
	snprintf(want, sizeof want, "unknown key \"relay_shrads\" in %s:4 "
		"(did you mean \"relay_shards\"?)", path);
	ck_assert_msg(strstr(out, want), "%s", out);
	/* smtp_url is notify's key: not declared here, no suggestion */
	snprintf(want, sizeof want, "unknown key \"smtp_ulr\" in %s:3\n", path);
	ck_assert_msg(strstr(out, want), "%s", out);
	ck_assert_msg(strstr(out, "(did you mean \"include\"?)"), "%s", out);
	snprintf(want, sizeof want, "unknown key \"zzz_unrelated\" in %s:6\n", path);
	ck_assert_msg(strstr(out, want), "%s", out);
	free(out);
}
END_TEST

/* wrong types and out-of-range values in a file, a flag and the
 * environment; the value of a secret is never echoed */
START_TEST(test_wrong_values_refused)
{
	char *out = NULL, want[300];

	write_conf("threads = many\nrelay_shards = 0\napi_server = event\n"
		"listen = nowhere\njwt_hs256_secret = short-secret\n"
		"pg_dsn = host=x password=hunter2 port\nkafka_log_level = 8\n"
		"log_level = verbose\nrelay_rewind_ms = 5s\n");
	ck_assert_int_eq(pin_config_load(path), 0);
	pin_config_set("relay_threads", "99");
	setenv("PIN_METRICS_LISTEN", "localhost", 1);
	ck_assert_int_eq(check_text(0, &out), 11);
	snprintf(want, sizeof want, "[error] invalid value \"many\" of key \"threads\" in "
		"%s:1: is not an integer", path);
	ck_assert_msg(strstr(out, want), "%s", out);
	snprintf(want, sizeof want, "invalid value \"0\" of key \"relay_shards\" in %s:2: "
		"is out of range 1..1024", path);
	ck_assert_msg(strstr(out, want), "%s", out);
	ck_assert_msg(strstr(out, "\"api_server\" in "), "%s", out);
	ck_assert_msg(strstr(out, "is not one of loop|threads"), "%s", out);
	ck_assert_msg(strstr(out, "is not host:port or unix:/path"), "%s", out);
	ck_assert_msg(strstr(out, "invalid value of key \"jwt_hs256_secret\""), "%s", out);
	ck_assert_msg(strstr(out, "must be 32 to 4096 bytes long"), "%s", out);
	ck_assert_msg(strstr(out, "is not a whole number of ms"), "%s", out);
	ck_assert_msg(strstr(out, "\"relay_threads\" in flag --relay-threads: "
		"is out of range 1..8"), "%s", out);
	ck_assert_msg(strstr(out, "invalid value \"localhost\" of key \"metrics_listen\" in "
		"environment PIN_METRICS_LISTEN"), "%s", out);
	ck_assert_msg(!strstr(out, "short-secret") && !strstr(out, "hunter2"), "%s", out);
	free(out);
}
END_TEST

/* only PIN_<KEY> of declared keys are read; other PIN_* variables are the
 * dev stack's and the tests': ignored, a near miss warned about */
START_TEST(test_env_rules)
{
	char *out = NULL;

	setenv("PIN_RELAY_SHRADS", "2", 1);
	setenv("PIN_BASE_URL_TEST_ONLY", "x", 1);
	ck_assert_int_eq(check_text(PIN_CFG_WORKER, &out), 0);
	ck_assert_msg(strstr(out, "[warn] variable \"PIN_RELAY_SHRADS\" in the environment: "
		"not a configuration key, ignored (did you mean PIN_RELAY_SHARDS?)"), "%s", out);
	ck_assert_msg(!strstr(out, "PIN_BASE_URL_TEST_ONLY"), "%s", out);
	ck_assert_int_eq(pin_config_int("relay_shards"), 4);
	free(out);
	unsetenv("PIN_BASE_URL_TEST_ONLY");
}
END_TEST

/* keys of another mode in the given file are accepted (a shared file);
 * --check-config notes them */
START_TEST(test_mode_notes)
{
	char *out = NULL;

	write_conf("mode = worker\nthreads = 4\nrelay_threads = 2\n");
	ck_assert_int_eq(pin_config_load(path), 0);
	ck_assert_int_eq(check_text(PIN_CFG_WORKER, &out), 0);
	ck_assert_msg(strstr(out, "[warn] key \"threads\" in "), "%s", out);
	ck_assert_msg(strstr(out, "ignored in this mode (it applies to: api)"), "%s", out);
	ck_assert_msg(!strstr(out, "relay_threads"), "%s", out);
	free(out);
	ck_assert_int_eq(pin_config_check(PIN_CFG_WORKER, NULL), 0);
}
END_TEST

static const struct pin_config_key testp_keys[] = {
	{ "testp.greeting", PIN_CFG_STRING, "hello", PIN_CFG_API, 0, 0, 0, NULL, NULL,
	  "test", "what the test plugin says" },
	{ "testp.batch", PIN_CFG_INT, "50", PIN_CFG_WORKER, PIN_CFG_RELOAD, 1, 100, NULL,
	  "rows", "test", "rows per batch" },
	{ "testp.token", PIN_CFG_STRING, "", PIN_CFG_WORKER, PIN_CFG_SECRET, 0, 0, NULL,
	  NULL, "test", "a token" },
	{ NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL, NULL }
};

/* a plugin's declared keys are accepted, checked, read with their default */
START_TEST(test_plugin_keys)
{
	char err[300] = "", *out = NULL;

	ck_assert_int_eq(pin_config_declare("testp", testp_keys, sizeof testp_keys[0],
		err, sizeof err), 0);
	ck_assert(pin_config_declared("testp.batch"));
	write_conf("testp.batch = 20\ntestp.greting = hi\ntestp.batch = 200\n");
	ck_assert_int_eq(pin_config_load(path), 0);
	ck_assert_int_eq(check_text(0, &out), 2);
	ck_assert_msg(strstr(out, "(did you mean \"testp.greeting\"?)"), "%s", out);
	ck_assert_msg(strstr(out, "is out of range 1..100"), "%s", out);
	free(out);
	ck_assert_str_eq(pin_config_str("testp.greeting"), "hello");
	/* the ABI: the declared default replaces the call site's */
	ck_assert_str_eq(pin_config_get("testp.greeting", "other"), "hello");
	ck_assert_int_eq(pin_config_int_def("relay_batch", 7), 1000);
	ck_assert_str_eq(pin_config_get("testp.token", "fallback"), "fallback");
	ck_assert_str_eq(pin_config_get("socket_mode", NULL), "0660");
}
END_TEST

/* a plugin cannot redeclare a host key, nor declare an invalid one */
START_TEST(test_plugin_bad_declarations)
{
	static const struct pin_config_key bad[] = {
		{ "threads", PIN_CFG_INT, "1", PIN_CFG_API, 0, 0, 0, NULL, NULL, NULL, "x" },
		{ "Bad Name", PIN_CFG_INT, "1", PIN_CFG_API, 0, 0, 0, NULL, NULL, NULL, "x" },
		{ "badp.mode", PIN_CFG_ENUM, "a", PIN_CFG_API, 0, 0, 0, NULL, NULL, NULL, "x" },
		{ "badp.n", PIN_CFG_INT, "500", PIN_CFG_API, 0, 1, 10, NULL, NULL, NULL, "x" },
		{ "badp.ok", PIN_CFG_INT, "5", PIN_CFG_API, 0, 1, 10, NULL, NULL, NULL, "x" },
		{ NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL, NULL }
	};
	char err[300] = "";

	ck_assert_int_eq(pin_config_declare("badp", bad, sizeof bad[0], err, sizeof err), -1);
	ck_assert(!pin_config_declared("Bad Name"));
	ck_assert(!pin_config_declared("badp.mode"));
	ck_assert(!pin_config_declared("badp.n"));
	ck_assert(pin_config_declared("badp.ok"));
	ck_assert_int_eq(pin_config_int("threads"), 0);
	ck_assert(pin_config_owner_declared("badp"));
}
END_TEST

/* a plugin of ABI < 1.7 declares nothing: unknown keys become warnings
 * (its own may be among them) unless they are near misses */
START_TEST(test_old_plugin_lenient)
{
	char *out = NULL;

	pin_config_note_undeclaring("oldp");
	write_conf("oldp.speed = 3\ndb_concurency = 8\n");
	ck_assert_int_eq(pin_config_load(path), 0);
	ck_assert_int_eq(check_text(0, &out), 1);
	ck_assert_msg(strstr(out, "[warn] undeclared key \"oldp.speed\""), "%s", out);
	ck_assert_msg(strstr(out, "[error] unknown key \"db_concurency\""), "%s", out);
	free(out);
	/* its ABI reads still see the value */
	ck_assert_str_eq(pin_config_get("oldp.speed", "1"), "3");
	ck_assert_int_eq(pin_config_int_def("oldp.speed", 1), 3);
	ck_assert_int_eq(pin_config_int_def("oldp.other", 1), 1);
}
END_TEST

/* --print-config: the effective value and its source, secrets redacted */
START_TEST(test_print_config)
{
	char err[300] = "", *out, want[300];

	ck_assert_int_eq(pin_config_declare("testp", testp_keys, sizeof testp_keys[0],
		err, sizeof err), 0);
	write_conf("pg_dsn = postgresql://pin:hunter2@db.example/pin\n"
		"pg_dsn_read = host=standby password='s3 cret' dbname=pin\n"
		"jwt_hs256_secret = 0123456789abcdef0123456789abcdef\n"
		"testp.token = tok-secret\nthreads = 3\nrelay_batch = 10\n");
	ck_assert_int_eq(pin_config_load(path), 0);
	setenv("PIN_RELAY_BATCH", "20", 1);
	pin_config_set("log_level", "debug");
	ck_assert_int_eq(pin_config_check(0, NULL), 0);
	out = print_text(0);
	ck_assert_msg(!strstr(out, "hunter2") && !strstr(out, "s3 cret") &&
		!strstr(out, "0123456789abcdef") && !strstr(out, "tok-secret"), "%s", out);
	ck_assert_msg(strstr(out, "pg_dsn = postgresql://pin:<redacted>@db.example/pin"), "%s", out);
	ck_assert_msg(strstr(out, "pg_dsn_read = host=standby password=<redacted> dbname=pin"),
		"%s", out);
	ck_assert_msg(strstr(out, "jwt_hs256_secret = <redacted>"), "%s", out);
	ck_assert_msg(strstr(out, "testp.token = <redacted>"), "%s", out);
	snprintf(want, sizeof want, "# %s:5", path);
	ck_assert_msg(strstr(out, "threads = 3") && strstr(out, want), "%s", out);
	ck_assert_msg(strstr(out, "# environment PIN_RELAY_BATCH"), "%s", out);
	ck_assert_msg(strstr(out, "log_level = debug"), "%s", out);
	ck_assert_msg(strstr(out, "# flag"), "%s", out);
	ck_assert_msg(strstr(out, "# plugin testp"), "%s", out);
	ck_assert_msg(strstr(out, "testp.greeting = hello"), "%s", out);
	ck_assert_msg(strstr(out, "# default"), "%s", out);
	free(out);
	/* a mode prints its keys only */
	out = print_text(PIN_CFG_WORKER);
	ck_assert_msg(!strstr(out, "\nthreads =") && strstr(out, "relay_batch ="), "%s", out);
	free(out);
}
END_TEST

/* every declaration of the host's table is consistent (a plugin's are
 * checked when it is declared), and no two keys share an environment
 * variable */
START_TEST(test_host_table)
{
	size_t n = 0;

	for (const struct pin_config_key *k = pin_config_host_keys; k->name; k++, n++) {
		char err[300] = "", env1[200], env2[200];
		struct pin_config_key copy[2] = { *k };
		char name[200];

		/* a renamed copy must declare cleanly: same checks as a plugin's */
		snprintf(name, sizeof name, "zz-selfcheck.%s", k->name);
		copy[0].name = name;
		ck_assert_msg(pin_config_declare(name, copy, sizeof copy[0], err, sizeof err) == 0,
			"%s: %s", k->name, err);
		ck_assert_msg(k->desc && strlen(k->desc) < 200, "%s", k->name);
		snprintf(env1, sizeof env1, "%s", k->name);
		for (const struct pin_config_key *j = k + 1; j->name; j++) {
			snprintf(env2, sizeof env2, "%s", j->name);
			for (char *p = env1; *p; p++)
				if (*p == '.' || *p == '-')
					*p = '_';
			for (char *p = env2; *p; p++)
				if (*p == '.' || *p == '-')
					*p = '_';
			ck_assert_msg(strcmp(env1, env2), "%s and %s share PIN_%s", k->name,
				j->name, env1);
		}
	}
	ck_assert_int_gt(n, 50);
}
END_TEST

/* the reference lists every key in each format */
START_TEST(test_reference)
{
	static const char *fmts[] = { "md", "man", "keys" };

	for (size_t f = 0; f < 3; f++) {
		char *out = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&out, &len);

		ck_assert_int_eq(pin_config_reference(m, fmts[f]), 0);
		fclose(m);
		for (const struct pin_config_key *k = pin_config_host_keys; k->name; k++) {
			char want[200];

			snprintf(want, sizeof want, f == 0 ? "| `%s` |" : f == 1 ? ".It Cm %s\n" :
				"%s\n", k->name);
			ck_assert_msg(strstr(out, want), "%s: no %s", fmts[f], want);
		}
		free(out);
	}
	ck_assert_int_eq(pin_config_reference(stdout, "html"), -1);
}
END_TEST

/* plugin_dir's plugins declare their keys from the descriptor, without
 * init (the fixture good.so declares good.greeting) */
START_TEST(test_declare_from_dir)
{
	char *out = NULL;

	ck_assert(!pin_config_declared("good.greeting"));
	pin_plugins_declare("", FIXTURE_DIR);
	ck_assert(pin_config_declared("good.greeting"));
	ck_assert(pin_config_owner_declared("good"));
	write_conf("good.greeting = hi\n");
	ck_assert_int_eq(pin_config_load(path), 0);
	ck_assert_int_eq(check_text(0, &out), 0);
	free(out);
	ck_assert_str_eq(pin_config_str("good.greeting"), "hi");
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
	tcase_add_test(tc, test_bool);
	tcase_add_test(tc, test_typo_refused);
	tcase_add_test(tc, test_reload);
	tcase_add_test(tc, test_wrong_values_refused);
	tcase_add_test(tc, test_env_rules);
	tcase_add_test(tc, test_mode_notes);
	tcase_add_test(tc, test_plugin_keys);
	tcase_add_test(tc, test_plugin_bad_declarations);
	tcase_add_test(tc, test_old_plugin_lenient);
	tcase_add_test(tc, test_print_config);
	tcase_add_test(tc, test_host_table);
	tcase_add_test(tc, test_reference);
	tcase_add_test(tc, test_declare_from_dir);
	suite_add_tcase(s, tc);
	return s;
}

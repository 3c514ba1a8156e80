/* fuzz_config.c -- pin_config_load on a fuzzed file (a temp file rewritten
 * for every input), then pin_config_check against the declared keys (the
 * did-you-mean search, every type's checker) and --print-config, then the
 * typed getters on keys the seeds use.
 * Property: no crash, no leak, a value read back is NUL-terminated text
 * without a newline; a checked configuration's values are within their
 * declared bounds. */
#include <unistd.h>
#include "core.h"
#include "api.h"
#include "worker.h"
#include "fuzz.h"

static char path[64];
static FILE *devnull;

static void setup(void)
{
	int fd;

	pin_log_set_level(PIN_LOG_ERROR + 1);
	snprintf(path, sizeof path, "/tmp/pin-fuzz-config-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		abort();
	close(fd);
	devnull = fopen("/dev/null", "w");
	if (!devnull)
		abort();
}

static const char *keys[] = { "mode", "threads", "listen", "allow_clock_offset",
	"jwt_hs256_secret", "pg_dsn", "socket_mode", "relay_shards" };
/* not declared: the ABI's config_get / config_int of an old plugin */
static const char *undeclared[] = { "job.slot-expiration.interval_ms", "a", "k", "" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	FILE *f;
	int rc;

	if (!ready) {
		setup();
		ready = 1;
	}
	if (size > 64 * 1024)
		return 0;
	f = fopen(path, "w");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	rc = pin_config_load(path);
	FUZZ_CHECK(rc == 0 || rc == -1, "rc %d", rc);
	if (pin_config_check(0, devnull) == 0) {
		FUZZ_CHECK(pin_config_int("relay_shards") >= 1 &&
			pin_config_int("relay_shards") <= 1024, "relay_shards out of bounds");
		FUZZ_CHECK(pin_config_int("socket_mode") <= 0777, "socket_mode out of bounds");
		pin_config_print(devnull, 0);
	}
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		const char *v = pin_config_str(keys[i]);

		FUZZ_CHECK(!strchr(v, '\n'), "value of %s has a newline", keys[i]);
		(void)pin_config_int(keys[i]);
		(void)pin_config_bool(keys[i]);
	}
	for (size_t i = 0; i < sizeof undeclared / sizeof undeclared[0]; i++) {
		const char *v = pin_config_get(undeclared[i], NULL);

		if (v)
			FUZZ_CHECK(!strchr(v, '\n'), "value of %s has a newline", undeclared[i]);
		(void)pin_config_int_def(undeclared[i], 7);
	}
	pin_config_free();
	return 0;
}

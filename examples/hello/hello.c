/* hello.c -- the smallest complete out-of-tree pin-host plugin: one public
 * route, GET /api/public/hello, answering {"hello":"world","plugin":"hello"}.
 *
 * Build against the installed SDK (pin-calendar-dev / pin-calendar-devel):
 *   make            # cc $(pkg-config --cflags pin-plugin) -shared -fPIC
 *   pin-host --check-plugin ./hello.so
 *   sudo make install   # into $(pkg-config --variable=plugindir pin-plugin)
 * then add "hello" to `plugins` in /etc/pin-calendar/api.conf and restart
 * pin-host-api@api. */
#include <stdio.h>

#include <pin/plugin.h>

static const struct pin_host_api *api;

static int hello_get(struct pin_req *req, void *ud)
{
	json_object *o = json_object_new_object();

	(void)ud;
	if (!o)
		return PIN_ERR;
	json_object_object_add(o, "hello", json_object_new_string("world"));
	json_object_object_add(o, "plugin", json_object_new_string("hello"));
	return api->respond_json(req, 200, o);
}

static int hello_init(const struct pin_host_api *host, struct pin_registrar *reg,
		char *err, size_t errlen)
{
	static const struct pin_route r = {
		.method = "GET",
		.pattern = "/api/public/hello",
		.actors = PIN_ACTOR_PUBLIC,
		.fn = hello_get,
	};

	api = host;
	if (reg->route(reg, &r) < 0) {   /* e.g. another plugin has this route */
		snprintf(err, errlen, "route GET %s refused", r.pattern);
		return -1;
	}
	return 0;
}

PIN_PLUGIN_DEFINE("hello", "1.0.0", hello_init, NULL)

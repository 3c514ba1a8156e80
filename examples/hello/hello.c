/* hello.c -- the smallest complete out-of-tree pin-host plugin: one public
 * route, GET /api/public/hello, answering {"hello":"world","plugin":"hello"},
 * and one configuration key it declares (hello.greeting, the "world"), so
 * the host checks it and documents it (pin-host --print-config-reference).
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
	/* the declared default when the configuration does not set it */
	json_object_object_add(o, "hello",
		json_object_new_string(api->config_str("hello.greeting")));
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

/* The keys this plugin reads: read by the host from the descriptor before
 * init (and from every plugin in plugin_dir), so a typo in pin-host.conf or
 * a bad value refuses the start; end with { NULL }. */
static const struct pin_config_key hello_keys[] = {
	{ .name = "hello.greeting", .type = PIN_CFG_STRING, .def = "world",
	  .modes = PIN_CFG_API, .flags = PIN_CFG_RELOAD, .min = 1, .max = 100,
	  .group = "hello", .desc = "what GET /api/public/hello greets" },
	{ .name = NULL }
};

PIN_PLUGIN_DEFINE_CONFIG("hello", "1.0.0", hello_init, NULL, hello_keys)

/* api.h -- the API side of pin-host: the request pipeline (request.c), the
 * libfcgi server (fcgi.c) and the event-loop server (fcgi_loop.c), JWT
 * verification (auth.c).  Built on the core (core.h); the worker side is not visible. */
#ifndef PIN_API_H
#define PIN_API_H

#include "core.h"

/* ---- auth.c: JWT verification ------------------------------------------- */
struct pin_auth_principal {
	char sub[64];
	char tenant_id[64];           /* "" when absent */
	char actor[32];
	unsigned actor_bit;
	char **permissions;           /* malloc'd */
	size_t n_permissions;
};
/* Reads jwt_hs256_secret, jwt_rs256_public_key_file, jwt_issuer, jwt_audience
 * from config.  0 ok, -1 bad key file (logged). */
/* Builds the key set (keys, issuer, audience) from the configuration now
 * loaded and makes it live; called again it is a reload: on failure (-1) the
 * running set stays.  Verifications in flight keep the set they began with. */
int pin_auth_init(void);
void pin_auth_fini(void);
/* how many key sets pin_auth_init has made live (0: none yet) */
unsigned long pin_auth_generation(void);
/* Verifies "Bearer <jwt>" header value.  0 ok (out filled, free with
 * pin_auth_principal_clear), -1 invalid with a reason in err (not secret). */
int pin_auth_verify(const char *authorization, struct pin_auth_principal *out,
		char *err, size_t errlen);
void pin_auth_principal_clear(struct pin_auth_principal *p);
unsigned pin_actor_bit(const char *actor);
/* The realm of the WWW-Authenticate challenge (api/openapi.yaml). */
#define PIN_AUTH_REALM "pin-calendar"
/* The WWW-Authenticate value of a 401 (RFC 6750 3) into out: authorization
 * the request's header (NULL: none), err the reason pin_auth_verify gave
 * (NULL: none). */
void pin_auth_challenge(const char *authorization, const char *err, char *out,
		size_t outlen);

/* ---- fcgi.c: API mode: size, listen, run the server ---------------------- */
int pin_api_run(const char *listen, int threads);     /* until SIGTERM */
/* the binary and arguments a successor is started with (main, at start) */
void pin_api_set_exec(char *const argv[]);
/* SIGUSR2: starts the successor on the listening socket (fd 3, LISTEN_FDS);
 * it sends this process SIGTERM once it holds the socket.  0 started. */
int pin_api_handover(void);
/* the listening socket is shared with systemd or another process: never
 * shut down or unlinked by this one */
bool pin_api_listen_shared(void);

/* ---- request.c: the request pipeline -------------------------------------- */
/* the database gate: at most cap requests at the database when threads
 * workers could bring more (true: the gate is on); closed when no thread
 * holds a slot */
bool pin_api_gate_open(long long cap, int threads);
void pin_api_gate_close(void);
/* One FastCGI request as the pipeline sees it, whichever server read it
 * (api_server: loop = fcgi_loop.c, threads = libfcgi). */
struct pin_fcgi_io {
	const char *(*param)(void *h, const char *name);   /* NULL: absent */
	int (*read)(void *h, char *buf, int n);            /* STDIN; 0: end */
	void (*write)(void *h, const char *head, size_t hlen, const char *body,
			size_t blen);                       /* the whole response */
	void *h;
	double t_ready;     /* pin_metrics_mono_s() when the request was whole
			     * (its wait for a worker counts in its duration);
			     * 0: now */
	bool body_over;     /* STDIN was longer than PIN_MAX_BODY (the loop
			     * kept only that much): 413 whatever
			     * Content-Length says */
};
void pin_fcgi_handle(const struct pin_fcgi_io *io);   /* request.c */
/* fcgi_loop.c: serves the listening socket sock until pin_wait_stop
 * returns, each whole request run by handle in one of `workers` threads;
 * *shared (read atomically, may turn true while it runs: a handover) says
 * the socket is another process's too, so a stop never shuts it down */
int pin_fcgi_loop_run(int sock, const bool *shared, int workers,
		void (*handle)(const struct pin_fcgi_io *io));
/* request accessors behind the api table (request.c) */
const char *pin_req_method(struct pin_req *r);
const char *pin_req_path(struct pin_req *r);
const char *pin_req_param(struct pin_req *r, const char *name);
const char *pin_req_query(struct pin_req *r, const char *name);
const char *pin_req_header(struct pin_req *r, const char *name);
json_object *pin_req_body(struct pin_req *r);
const struct pin_principal *pin_req_principal(struct pin_req *r);
const char *pin_req_trace_id(struct pin_req *r);
int pin_respond_json(struct pin_req *r, int status, json_object *body);
int pin_respond_json_text(struct pin_req *r, int status, char *text, size_t len);
int pin_respond_body(struct pin_req *r, int status, const char *content_type,
		char *body, size_t len);
int pin_set_header(struct pin_req *r, const char *name, const char *value);
int pin_respond_problem(struct pin_req *r, int status, const char *code,
		const char *detail, json_object *errors);
#define PIN_MAX_BODY (64 * 1024)
/* STDIN bytes a server reads and drops past a body before it closes the
 * connection after its answer (both servers) */
#define PIN_API_DRAIN_MAX (2 * 1024 * 1024)

#endif

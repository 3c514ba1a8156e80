/*
 * sdk/core.h -- the plugin SDK: domain-free helpers every plugin may link
 * (plugins/sdk/libpinsdk.la).  This header holds what all the others share:
 * the host table and the error convention.  One header per concern:
 *
 *   sdk/problem.h  validation error collectors, problem+json answers
 *   sdk/body.h     the JSON request body: strict fields, typed getters
 *   sdk/query.h    query string and path parameters
 *   sdk/instant.h  instants (API text, SQL parameters), IANA time zones
 *   sdk/page.h     keyset paging cursors and pages
 *   sdk/etag.h     If-Match
 *   sdk/idem.h     Idempotency-Key
 *   sdk/pg.h       libpq result helpers, JSON output of columns
 *   sdk/colmap.h   a row as a JSON object by column names
 *   sdk/publish.h  the outbox put helper
 *   sdk/reg.h      registration of route tables and consumers
 *   sdk/consume.h  consumer helpers (failures, contract versions)
 *   sdk/batchjob.h polling jobs in batches, lag gauges
 *   sdk/topics.h   every Kafka topic and consumer group, the one list
 *   sdk/replica.h  the consumer skeleton of an identity replica
 *   sdk/sdk.h      all of the above
 *
 * Setup: a plugin calls pc_init(api) once, from its init; every SDK (and
 * domain library) function uses that one table, pc_api.
 *
 * Memory: unless said otherwise, strings returned are in the host arena of
 * the current invocation (never free them).  json_object results are new
 * references owned by the caller.  PGresult pointers are arena results.
 *
 * Error convention (every SDK and domain-library helper):
 *   - 0 is success; a failure is negative: PIN_ERR / PIN_ERR_DB (host,
 *     pin/plugin.h), PC_E_* below (SDK and shared domain codes, -10..-39),
 *     or a domain library's own codes (-40..-99, e.g. CD_APT_E_* of
 *     caldomain/appointment.h), which that library maps to problem answers
 *     explicitly.
 *   - A helper never returns a positive value to mean something else:
 *     "nothing changed", "header present", "found" and the like come back in
 *     an out-parameter (e.g. pc_if_match's *present, pc_event_reschedule's
 *     *changed) or as an enum (enum pc_field of the getters).
 *   - Pure predicates (pc_has_perm, cd_rule_can_reschedule) return 1 / 0.
 */
#ifndef PIN_SDK_CORE_H
#define PIN_SDK_CORE_H

#include <stdint.h>
#include <stddef.h>
#include "pin/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The host table of the current plugin; set once by pc_init(). */
extern const struct pin_host_api *pc_api;
void pc_init(const struct pin_host_api *api);

/* Error codes shared by the SDK and the domain libraries. */
#define PC_E_NOT_FOUND        -10  /* 404 <entity>_NOT_FOUND */
#define PC_E_TRANSITION       -11  /* 409 INVALID_STATUS_TRANSITION */
#define PC_E_VERSION          -12  /* 409 VERSION_CONFLICT */
#define PC_E_MANAGED          -13  /* 409 EVENT_MANAGED_BY_SOURCE */
#define PC_E_VALIDATION       -14  /* 422 VALIDATION_FAILED (errors collected) */
#define PC_E_TZ               -15  /* 422 UNKNOWN_TIME_ZONE */
#define PC_E_REPLAYED         -16  /* idempotent replay already answered */
#define PC_E_RESPONDED        -17  /* a response was already sent */
#define PC_E_RANGE            -18  /* 422 VALIDATION_FAILED: a derived instant
                                      leaves the range of sdk/instant.h */
/* Domain libraries number their own codes from here down to -99. */
#define PC_E_DOMAIN_FIRST     -40

/* 1 when the principal has permission perm, else 0. */
int pc_has_perm(const struct pin_principal *p, const char *perm);

#ifdef __cplusplus
}
#endif
#endif /* PIN_SDK_CORE_H */

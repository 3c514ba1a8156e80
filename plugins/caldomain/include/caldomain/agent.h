/*
 * caldomain/agent.h -- whether an agent can be booked and publish slots,
 * and what a departure does (issue 12, agent.c, prefix cd_agent_).
 *
 * "Active" is the status of the identity replica (calendar.user_replicas,
 * kept by the identity consumer of workers.so from pin.identity.users.v1).
 * An agent without a replica row counts as active: the replica is display
 * data that may lag, and refusing every agent identity has not announced
 * yet would stop the product.  Any other stored status (Deactivated; the
 * consumer stores every status it does not know as Deactivated) is
 * "unavailable".
 *
 * Uses pc_api only; every function runs in the caller's transaction.
 * Returns 0 or a negative PIN_ERR* (sdk/core.h).
 */
#ifndef PIN_CALDOMAIN_AGENT_H
#define PIN_CALDOMAIN_AGENT_H

#include <stdint.h>
#include "sdk/core.h"

/* *active = 1 when user_id may be booked / publish (see above). */
int cd_agent_active(const char *user_id, int *active);

/* Serialises the slot writers of one owner for the rest of the transaction
 * (transaction advisory lock): slot publishing (slots.so) and a departure
 * take it before they read or write the owner's slots, so a batch can never
 * commit Available slots next to a departure that archived the others. */
int cd_agent_slots_lock(const char *owner_user_id);

/* What a departure did. */
struct cd_agent_departure {
	int archived;       /* Available slots -> Archived */
	int declined;       /* Pending appointments -> Declined (AgentUnavailable) */
	int confirmed;      /* Confirmed appointments still ahead (left to the agency) */
};

/*
 * The agent's replica was just set to a status other than Active: in the
 * caller's transaction, every Available slot -> Archived, every Pending
 * appointment -> Declined with reason AgentUnavailable (cd_apt_decline_unavailable:
 * full cascade and messages), Confirmed appointments are counted, not touched.
 * Idempotent: a second run finds nothing to do.  0 / PIN_ERR_DB.
 */
int cd_agent_depart(const char *user_id, int64_t now_us, struct cd_agent_departure *out);

#endif

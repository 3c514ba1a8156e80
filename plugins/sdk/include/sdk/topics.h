/* sdk/topics.h -- every Kafka topic and consumer group of PIN, the one list
 * (doc/events.md).  The plugins name topics and groups only through these
 * macros; the dev broker (tools/devbroker.c) creates exactly PC_TOPICS,
 * PC_DEV_TOPICS and the dead-letter topic of every group of PC_GROUPS and
 * PC_DEV_GROUPS; tests/contract/check-topics.sh (make check) holds
 * api/asyncapi.yaml's channels to PC_TOPICS and finds no topic or group
 * name spelt out anywhere else in plugins/ and tools/.
 *
 * Only the preprocessor: no code, no table of any context.  A new topic is
 * one #define here, its line in PC_TOPICS and its channel in asyncapi.yaml.
 */
#ifndef PIN_SDK_TOPICS_H
#define PIN_SDK_TOPICS_H

/* ---- pin.calendar.*: produced by the calendar plugins through the outbox,
 *      consumed by notify */
#define PC_TOPIC_EVENT_CREATED           "pin.calendar.event-created.v1"
#define PC_TOPIC_EVENT_RESCHEDULED       "pin.calendar.event-rescheduled.v1"
#define PC_TOPIC_EVENT_STATUS_CHANGED    "pin.calendar.event-status-changed.v1"
#define PC_TOPIC_EVENT_OWNER_CHANGED     "pin.calendar.event-owner-changed.v1"
#define PC_TOPIC_APPOINTMENT_CREATED     "pin.calendar.appointment-created.v1"
#define PC_TOPIC_APPOINTMENT_CONFIRMED   "pin.calendar.appointment-confirmed.v1"
#define PC_TOPIC_APPOINTMENT_CANCELLED   "pin.calendar.appointment-cancelled.v1"
#define PC_TOPIC_APPOINTMENT_COMPLETED   "pin.calendar.appointment-completed.v1"
#define PC_TOPIC_REMINDER_DUE            "pin.calendar.reminder-due.v1"
/* ---- pin.crm.*: produced by the CRM, consumed by workers */
#define PC_TOPIC_CRM_BOOKING_CREATED     "pin.crm.booking-created.v1"
#define PC_TOPIC_CRM_BOOKING_CONFIRMED   "pin.crm.booking-confirmed.v1"
#define PC_TOPIC_CRM_BOOKING_PAID        "pin.crm.booking-paid.v1"
#define PC_TOPIC_CRM_BOOKING_EXPIRED     "pin.crm.booking-expired.v1"
#define PC_TOPIC_CRM_BOOKING_CANCELLED   "pin.crm.booking-cancelled.v1"
#define PC_TOPIC_CRM_DEAL_CREATED        "pin.crm.deal-created.v1"
#define PC_TOPIC_CRM_DEAL_MEMBERS_CHANGED "pin.crm.deal-members-changed.v1"
#define PC_TOPIC_CRM_DEAL_CLOSED         "pin.crm.deal-closed.v1"
/* ---- pin.identity.*: produced by identity, consumed by workers and notify */
#define PC_TOPIC_IDENTITY_USERS          "pin.identity.users.v1"
/* ---- pin.notifications.*: produced by notify */
#define PC_TOPIC_NOTIFICATIONS_DISPATCHED "pin.notifications.dispatched.v1"

/* The contract topics (each a channel of api/asyncapi.yaml): X(topic) each. */
#define PC_TOPICS(X) \
	X(PC_TOPIC_EVENT_CREATED) \
	X(PC_TOPIC_EVENT_RESCHEDULED) \
	X(PC_TOPIC_EVENT_STATUS_CHANGED) \
	X(PC_TOPIC_EVENT_OWNER_CHANGED) \
	X(PC_TOPIC_APPOINTMENT_CREATED) \
	X(PC_TOPIC_APPOINTMENT_CONFIRMED) \
	X(PC_TOPIC_APPOINTMENT_CANCELLED) \
	X(PC_TOPIC_APPOINTMENT_COMPLETED) \
	X(PC_TOPIC_REMINDER_DUE) \
	X(PC_TOPIC_CRM_BOOKING_CREATED) \
	X(PC_TOPIC_CRM_BOOKING_CONFIRMED) \
	X(PC_TOPIC_CRM_BOOKING_PAID) \
	X(PC_TOPIC_CRM_BOOKING_EXPIRED) \
	X(PC_TOPIC_CRM_BOOKING_CANCELLED) \
	X(PC_TOPIC_CRM_DEAL_CREATED) \
	X(PC_TOPIC_CRM_DEAL_MEMBERS_CHANGED) \
	X(PC_TOPIC_CRM_DEAL_CLOSED) \
	X(PC_TOPIC_IDENTITY_USERS) \
	X(PC_TOPIC_NOTIFICATIONS_DISPATCHED)

/* ---- consumer groups (struct pin_consumer.group); the host sends what a
 *      group cannot take to its dead-letter topic PC_DLQ(group) */
#define PC_GROUP_CRM_BOOKING      "calendar-crm-booking-events"     /* workers */
#define PC_GROUP_CRM_DEAL         "calendar-crm-deal-events"        /* workers */
#define PC_GROUP_CAL_IDENTITY     "calendar-identity-users"         /* workers */
#define PC_GROUP_NTF_EVENTS       "notifications-calendar-events"   /* notify */
#define PC_GROUP_NTF_IDENTITY     "notifications-identity-users"    /* notify */
#define PC_DLQ(group) group ".dlq"

#define PC_GROUPS(X) \
	X(PC_GROUP_CRM_BOOKING) \
	X(PC_GROUP_CRM_DEAL) \
	X(PC_GROUP_CAL_IDENTITY) \
	X(PC_GROUP_NTF_EVENTS) \
	X(PC_GROUP_NTF_IDENTITY)

/* ---- dev and tests only (no contract, not in asyncapi.yaml): the test
 *      consumer plugin's topic and group (tests/fixtures/testcons.c) and
 *      the relay benchmark's topic, which nobody consumes (./dev bench
 *      relay).  The dev broker does not create the test consumer's batch
 *      topic nor its group's DLQ: the broker's auto-creation makes them,
 *      as their tests expect. */
#define PC_TOPIC_TEST_EVENTS      "pin.test.events.v1"
#define PC_TOPIC_TEST_BATCH       "pin.test.batch.v1"
#define PC_TOPIC_BENCH_RELAY      "pin.bench.relay.v1"
#define PC_GROUP_TEST             "test-consumer"
#define PC_GROUP_TEST_BATCH       "test-consumer-batch"

#define PC_DEV_TOPICS(X) \
	X(PC_TOPIC_TEST_EVENTS) \
	X(PC_TOPIC_BENCH_RELAY)
#define PC_DEV_GROUPS(X) \
	X(PC_GROUP_TEST)

#endif

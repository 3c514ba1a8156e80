/* caldomain/schema.h -- names of the calendar schema that several plugins
 * use (no code). */
#ifndef PIN_CALDOMAIN_SCHEMA_H
#define PIN_CALDOMAIN_SCHEMA_H

/* The consumer inbox of the calendar plugins' consumer groups (dedup of
 * messages by messageId; struct pin_consumer.inbox_table). */
#define CD_INBOX_TABLE "calendar.inbox"

/* The Idempotency-Key store of the calendar plugins' writes (sdk/idem.h:
 * pc_idem_table in their init). */
#define CD_IDEM_TABLE "calendar.idempotency_keys"

#endif

/* dispatch.h -- notify.so delivery (issue 10): the dispatcher job
 * (dispatch.c), which sends through the senders of send.h.  Only
 * pin/plugin.h and libcurl; nothing from plugins/common. */
#ifndef PIN_NOTIFY_DISPATCH_H
#define PIN_NOTIFY_DISPATCH_H

#include <stddef.h>
#include "pin/plugin.h"

#define NTF_OUTBOX "notifications.outbox"

/* dispatch.c: registers the job notification-dispatch and the outbox.
 * 0, or -1 with err. */
int ntf_dispatch_register(const struct pin_host_api *api, struct pin_registrar *reg,
		char *err, size_t errlen);
void ntf_dispatch_fini(void);

#endif

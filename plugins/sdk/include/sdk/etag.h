/* sdk/etag.h -- If-Match preconditions on versioned resources. */
#ifndef PIN_SDK_ETAG_H
#define PIN_SDK_ETAG_H

#include "sdk/core.h"

/* Parses an If-Match value: "\"3\"", "W/\"3\"" -> 3 (a weak tag is taken
 * as its version: a compressing proxy may weaken the ETag it forwards).  An
 * unquoted 3, "*", a list of tags: PIN_ERR.  Pure.  0 ok, PIN_ERR malformed. */
int pc_parse_if_match(const char *value, int *version);
/* Reads the If-Match header: 0 with *present = 0 (absent) or *present = 1
 * and *version; PC_E_RESPONDED after answering 400 MALFORMED_REQUEST. */
int pc_if_match(struct pin_req *r, int *present, int *version);

#endif

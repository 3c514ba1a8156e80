/* sdk/sdk.h -- every header of the plugin SDK (see sdk/core.h for the
 * list, the setup and the error convention). */
#ifndef PIN_SDK_SDK_H
#define PIN_SDK_SDK_H

#include "sdk/core.h"
#include "sdk/problem.h"
#include "sdk/body.h"
#include "sdk/query.h"
#include "sdk/instant.h"
#include "sdk/page.h"
#include "sdk/etag.h"
#include "sdk/idem.h"
#include "sdk/pg.h"
#include "sdk/publish.h"
#include "sdk/reg.h"
#include "sdk/consume.h"
#include "sdk/batchjob.h"
#include "sdk/purge.h"
#include "sdk/jtext.h"
#include "sdk/topics.h"
#include "sdk/replica.h"
#include "sdk/ical.h"
#include "sdk/manage.h"
#include "sdk/colmap.h"

#endif

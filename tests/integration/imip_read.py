#!/usr/bin/python3
"""imip_read.py MAILFILE -- reads one e-mail of notify.so the way a mail
client does (Python's email package: the MIME tree) and its invitation
with python3-icalendar (issue 32 item 2, RFC 6047 iMIP); prints what it
found as one JSON object for test_imip.c to compare:
  parts      the content types, depth first ("multipart/mixed", ...)
  method     the text/calendar part's method= parameter
  plain      the text/plain part, decoded
  same       the invite.ics attachment is the same calendar as the part
  METHOD UID SEQUENCE STATUS DTSTART DTEND ORGANIZER ATTENDEE SUMMARY
             read by icalendar (times as ISO 8601 UTC)
Exit 0; a missing part is a missing key (the test fails on it)."""
import email
import email.policy
import json
import sys

import icalendar

with open(sys.argv[1], 'rb') as f:
    msg = email.message_from_binary_file(f, policy=email.policy.default)
out = {'parts': [p.get_content_type() for p in msg.walk()]}
cal_text = att_text = None
for p in msg.walk():
    ct = p.get_content_type()
    if ct == 'text/plain' and 'plain' not in out:
        out['plain'] = p.get_content()
    elif ct == 'text/calendar':
        out['method'] = p.get_param('method')
        out['charset'] = p.get_param('charset')
        cal_text = p.get_payload(decode=True)
    elif ct == 'application/ics':
        out['filename'] = p.get_filename()
        att_text = p.get_payload(decode=True)
if cal_text is not None:
    out['same'] = cal_text == att_text
    cal = icalendar.Calendar.from_ical(cal_text)
    out['METHOD'] = str(cal.get('METHOD'))
    events = [c for c in cal.walk() if c.name == 'VEVENT']
    out['events'] = len(events)
    ev = events[0]
    for k in ('UID', 'STATUS', 'ORGANIZER', 'ATTENDEE', 'SUMMARY'):
        if ev.get(k) is not None:
            out[k] = str(ev.get(k))
    out['SEQUENCE'] = int(ev.get('SEQUENCE'))
    for k in ('DTSTART', 'DTEND'):
        dt = ev.decoded(k)
        out[k] = dt.strftime('%Y-%m-%dT%H:%M:%SZ') if dt.utcoffset() is not None and \
            dt.utcoffset().total_seconds() == 0 else dt.isoformat()
print(json.dumps(out, ensure_ascii=False))

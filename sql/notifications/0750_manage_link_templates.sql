-- Issue 32 item 3: the investor's e-mails and SMS about an appointment that
-- can still be cancelled carry the manage links ({{manageUrl}} to cancel,
-- {{rescheduleUrl}} to move it, e-mail only: an SMS stays short; rendered by
-- notify.so: notify.public_base_url + /manage/<signed token>).  Lines of
-- their own at the end of the body: notify.so leaves a line out when there
-- is no link (no key file or base URL configured).  InApp stays as it is
-- (the investor is signed in there).  Only texts that have no {{manageUrl}}
-- yet are changed, so an operator's own lines are kept.
UPDATE notifications.notification_templates t
SET updated_at = now(),
    body_template = t.body_template || E'\n\n' ||
	CASE WHEN t.locale LIKE 'ru%' THEN 'Отменить встречу: {{manageUrl}}'
	     ELSE 'To cancel the meeting: {{manageUrl}}' END ||
	CASE WHEN t.channel = 'Sms' THEN ''
	     WHEN t.locale LIKE 'ru%' THEN E'\nПеренести на другое время: {{rescheduleUrl}}'
	     ELSE E'\nTo move it to another time: {{rescheduleUrl}}' END
WHERE t.channel IN ('Email', 'Sms')
  AND (t.kind, t.role) IN (('AppointmentCreated', 'Investor'),
                           ('AppointmentCreated', 'Investor.Rescheduled'),
                           ('AppointmentConfirmed', 'Investor'),
                           ('AppointmentReminder', 'Client'))
  AND t.body_template NOT LIKE '%{{manageUrl}}%';

-- Issue 12 item 1: appointment-cancelled with Reason = AgentUnavailable (the
-- agent's identity status left Active; the calendar declined the Pending
-- appointment) -> the investor is told.  Same channels as every Kind
-- (InApp, Email, and an Sms text for an opt-in).
INSERT INTO notifications.notification_templates
	(kind, locale, channel, role, status, title_template, body_template)
SELECT 'AppointmentCancelled', s.locale, c.channel, 'Investor.AgentUnavailable', 'Active',
	s.title, s.body
FROM (VALUES
	('ru', 'Запись отменена: агент недоступен',
	 'Агент {{agentName}} больше не принимает записи, поэтому запись на {{start}} ({{timeZone}}) отменена. Выберите другое время или агента.'),
	('en', 'Appointment cancelled: agent unavailable',
	 'Agent {{agentName}} no longer takes appointments, so the appointment on {{start}} ({{timeZone}}) was cancelled. Please choose another time or agent.')
) AS s(locale, title, body)
CROSS JOIN (VALUES ('InApp'), ('Email'), ('Sms')) AS c(channel)
ON CONFLICT DO NOTHING;

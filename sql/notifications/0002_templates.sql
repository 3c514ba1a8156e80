-- Seeded templates (notifications.md, INV-TPL-5): ru and en texts for every
-- Kind x Role x Channel the seed 001 mapping uses.  Default channels are
-- InApp + Email for every Kind, + Sms for AppointmentReminder; Sms texts are
-- seeded for every Kind too, so a settings opt-in (INV-UNS-3) has a body.
-- Roles name the recipient and,
-- where the mapping asks for a different text, the variant (Agent.Pending ...).
-- Placeholders (rendered by notify.so): {{start}} {{end}} {{timeZone}}
-- {{confirmDeadline}} (local, event time zone, recipient locale format),
-- {{offset}}, {{agentName}} {{investorName}} {{ownerName}} {{clientName}}
-- {{previousOwnerName}} (contact replica), {{cancelReason}}.
CREATE TEMP TABLE ntf_seed (kind text, role text, locale text, title text, body text) ON COMMIT DROP;
INSERT INTO ntf_seed VALUES
-- AppointmentCreated
('AppointmentCreated', 'Agent.Pending', 'ru', 'Новая запись на {{start}}',
 '{{investorName}} записался на встречу {{start}} ({{timeZone}}). Подтвердите запись до {{confirmDeadline}}.'),
('AppointmentCreated', 'Agent.Pending', 'en', 'New appointment on {{start}}',
 '{{investorName}} booked a meeting on {{start}} ({{timeZone}}). Please confirm it before {{confirmDeadline}}.'),
('AppointmentCreated', 'Agent.Confirmed', 'ru', 'Новая запись на {{start}}',
 '{{investorName}} записался на встречу {{start}} ({{timeZone}}). Запись подтверждена автоматически.'),
('AppointmentCreated', 'Agent.Confirmed', 'en', 'New appointment on {{start}}',
 '{{investorName}} booked a meeting on {{start}} ({{timeZone}}). It was confirmed automatically.'),
('AppointmentCreated', 'Agent.Rescheduled', 'ru', 'Запись перенесена на {{start}}',
 '{{investorName}} перенёс встречу на {{start}} ({{timeZone}}).'),
('AppointmentCreated', 'Agent.Rescheduled', 'en', 'Appointment moved to {{start}}',
 '{{investorName}} moved the meeting to {{start}} ({{timeZone}}).'),
('AppointmentCreated', 'Agent.RescheduledPending', 'ru', 'Запись перенесена на {{start}}',
 '{{investorName}} перенёс встречу на {{start}} ({{timeZone}}). Подтвердите новое время до {{confirmDeadline}}.'),
('AppointmentCreated', 'Agent.RescheduledPending', 'en', 'Appointment moved to {{start}}',
 '{{investorName}} moved the meeting to {{start}} ({{timeZone}}). Please confirm the new time before {{confirmDeadline}}.'),
('AppointmentCreated', 'Investor', 'ru', 'Заявка на встречу создана',
 'Ваша заявка на встречу {{start}} ({{timeZone}}) с агентом {{agentName}} создана.'),
('AppointmentCreated', 'Investor', 'en', 'Appointment request created',
 'Your request for a meeting with agent {{agentName}} on {{start}} ({{timeZone}}) was created.'),
('AppointmentCreated', 'Investor.Rescheduled', 'ru', 'Встреча перенесена',
 'Ваша встреча с агентом {{agentName}} перенесена на {{start}} ({{timeZone}}).'),
('AppointmentCreated', 'Investor.Rescheduled', 'en', 'Meeting moved',
 'Your meeting with agent {{agentName}} was moved to {{start}} ({{timeZone}}).'),
-- AppointmentConfirmed
('AppointmentConfirmed', 'Investor', 'ru', 'Встреча подтверждена',
 'Встреча с агентом {{agentName}} {{start}} ({{timeZone}}) подтверждена.'),
('AppointmentConfirmed', 'Investor', 'en', 'Meeting confirmed',
 'Your meeting with agent {{agentName}} on {{start}} ({{timeZone}}) is confirmed.'),
-- AppointmentCancelled
('AppointmentCancelled', 'Investor.DeclinedByAgent', 'ru', 'Запись отклонена',
 'Агент {{agentName}} отклонил запись на {{start}} ({{timeZone}}).'),
('AppointmentCancelled', 'Investor.DeclinedByAgent', 'en', 'Appointment declined',
 'Agent {{agentName}} declined the appointment on {{start}} ({{timeZone}}).'),
('AppointmentCancelled', 'Investor.CancelledByAgent', 'ru', 'Встреча отменена',
 'Агент {{agentName}} отменил встречу {{start}} ({{timeZone}}).'),
('AppointmentCancelled', 'Investor.CancelledByAgent', 'en', 'Meeting cancelled',
 'Agent {{agentName}} cancelled the meeting on {{start}} ({{timeZone}}).'),
('AppointmentCancelled', 'Agent.CancelledByInvestor', 'ru', 'Клиент отменил встречу',
 '{{investorName}} отменил встречу {{start}} ({{timeZone}}).'),
('AppointmentCancelled', 'Agent.CancelledByInvestor', 'en', 'Client cancelled the meeting',
 '{{investorName}} cancelled the meeting on {{start}} ({{timeZone}}).'),
('AppointmentCancelled', 'Investor.Expired', 'ru', 'Агент не подтвердил запись',
 'Агент {{agentName}} не подтвердил запись на {{start}} ({{timeZone}}) вовремя, запись отменена.'),
('AppointmentCancelled', 'Investor.Expired', 'en', 'The agent did not confirm',
 'Agent {{agentName}} did not confirm the appointment on {{start}} ({{timeZone}}) in time; it was cancelled.'),
('AppointmentCancelled', 'Agent.Expired', 'ru', 'Запись просрочена',
 'Запись {{investorName}} на {{start}} ({{timeZone}}) не подтверждена вовремя и отменена.'),
('AppointmentCancelled', 'Agent.Expired', 'en', 'Appointment expired',
 'The appointment of {{investorName}} on {{start}} ({{timeZone}}) was not confirmed in time and was cancelled.'),
('AppointmentCancelled', 'Client', 'ru', 'Встреча отменена',
 'Встреча {{start}} ({{timeZone}}) с {{ownerName}} отменена. Причина: {{cancelReason}}.'),
('AppointmentCancelled', 'Client', 'en', 'Meeting cancelled',
 'The meeting with {{ownerName}} on {{start}} ({{timeZone}}) was cancelled. Reason: {{cancelReason}}.'),
('AppointmentCancelled', 'Owner.BookingDeadline', 'ru', 'Дедлайн брони снят',
 'Дедлайн брони {{start}} ({{timeZone}}) снят из календаря.'),
('AppointmentCancelled', 'Owner.BookingDeadline', 'en', 'Booking deadline removed',
 'The booking deadline {{start}} ({{timeZone}}) was removed from your calendar.'),
-- CalendarReminder
('CalendarReminder', 'Owner.BookingDeadline', 'ru', 'Дедлайн брони добавлен в календарь',
 'Срок по брони: {{start}} ({{timeZone}}).'),
('CalendarReminder', 'Owner.BookingDeadline', 'en', 'Booking deadline added to your calendar',
 'Booking deadline: {{start}} ({{timeZone}}).'),
('CalendarReminder', 'Owner', 'ru', 'Напоминание о событии {{start}}',
 'Через {{offset}} начинается событие календаря: {{start}} ({{timeZone}}).'),
('CalendarReminder', 'Owner', 'en', 'Reminder: event at {{start}}',
 'Your calendar event starts in {{offset}}: {{start}} ({{timeZone}}).'),
('CalendarReminder', 'Client', 'ru', 'Напоминание о встрече',
 'Через {{offset}} встреча с {{ownerName}}: {{start}} ({{timeZone}}).'),
('CalendarReminder', 'Client', 'en', 'Meeting reminder',
 'Your meeting with {{ownerName}} starts in {{offset}}: {{start}} ({{timeZone}}).'),
-- AppointmentReminder
('AppointmentReminder', 'Owner', 'ru', 'Напоминание: встреча {{start}}',
 'Через {{offset}} встреча с {{clientName}}: {{start}} ({{timeZone}}).'),
('AppointmentReminder', 'Owner', 'en', 'Reminder: meeting at {{start}}',
 'Your meeting with {{clientName}} starts in {{offset}}: {{start}} ({{timeZone}}).'),
('AppointmentReminder', 'Client', 'ru', 'Напоминание о встрече',
 'Через {{offset}} встреча с агентом {{ownerName}}: {{start}} ({{timeZone}}).'),
('AppointmentReminder', 'Client', 'en', 'Meeting reminder',
 'Your meeting with agent {{ownerName}} starts in {{offset}}: {{start}} ({{timeZone}}).'),
-- CalendarEventRescheduled
('CalendarEventRescheduled', 'Client', 'ru', 'Встреча перенесена',
 '{{ownerName}} перенёс встречу на {{start}} ({{timeZone}}).'),
('CalendarEventRescheduled', 'Client', 'en', 'Meeting moved',
 '{{ownerName}} moved your meeting to {{start}} ({{timeZone}}).'),
('CalendarEventRescheduled', 'Owner.BookingDeadline', 'ru', 'Дедлайн брони продлён',
 'Новый срок по брони: {{start}} ({{timeZone}}).'),
('CalendarEventRescheduled', 'Owner.BookingDeadline', 'en', 'Booking deadline extended',
 'New booking deadline: {{start}} ({{timeZone}}).'),
-- CalendarEventOwnerChanged
('CalendarEventOwnerChanged', 'Owner', 'ru', 'На вас переведено обязательство сделки',
 'Вам передано обязательство по сделке со сроком {{start}} ({{timeZone}}).'),
('CalendarEventOwnerChanged', 'Owner', 'en', 'A deal obligation was assigned to you',
 'A deal obligation due {{start}} ({{timeZone}}) is now yours.'),
('CalendarEventOwnerChanged', 'PreviousOwner', 'ru', 'Обязательство снято',
 'Обязательство по сделке со сроком {{start}} ({{timeZone}}) передано {{ownerName}}.'),
('CalendarEventOwnerChanged', 'PreviousOwner', 'en', 'Deal obligation reassigned',
 'The deal obligation due {{start}} ({{timeZone}}) was reassigned to {{ownerName}}.');

INSERT INTO notifications.notification_templates
	(kind, locale, channel, role, status, title_template, body_template)
SELECT s.kind, s.locale, c.channel, s.role, 'Active', s.title, s.body
FROM ntf_seed s
CROSS JOIN (VALUES ('InApp'), ('Email'), ('Sms')) AS c(channel);

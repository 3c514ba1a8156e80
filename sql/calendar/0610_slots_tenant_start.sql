-- Issue 12 item 2: the PIN manager's slot view lists one tenant's slots by
-- StartAt (GET /api/v1/pin-manager/calendar/slots?tenantId=...), keyset
-- paged on (start_at, id).
CREATE INDEX ix_availability_slots_tenant_start
	ON calendar.availability_slots (tenant_id, start_at, id);

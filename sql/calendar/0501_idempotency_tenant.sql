-- Idempotency-Key records are keyed on (caller, tenant, key) (issue 9 item
-- 4): a token with the same sub and another tenant_id never replays the
-- first tenant's response.  tenant_id is the token's tenant_id claim, ''
-- for tokens without one (investors).  Rows written before this migration
-- get '' and simply expire within 24 h.
ALTER TABLE calendar.idempotency_keys ADD COLUMN tenant_id text NOT NULL DEFAULT '';
ALTER TABLE calendar.idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE calendar.idempotency_keys ADD PRIMARY KEY (caller, tenant_id, key);

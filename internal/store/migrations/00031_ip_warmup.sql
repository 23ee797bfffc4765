-- +goose Up
-- IP warm-up (package ippool, Schedule): a new address sends a daily
-- volume that grows by a schedule counted in UTC days from
-- warmup_started_at; NULL is an address that is not warming up (its
-- warm-up was skipped or marked done). Addresses added from now on start
-- warming up when they are first synced or created; those already stored
-- were sending without limit before this migration and stay so
-- (`posthaste admin warmup --ip ... --start` restarts one).
ALTER TABLE ip_address ADD COLUMN warmup_started_at timestamptz;
ALTER TABLE ip_address ALTER COLUMN warmup_started_at SET DEFAULT now();

-- One row per address per UTC day: the messages (recipients) that took
-- the address that day, counted when a delivery takes it, and shared by
-- every process. A take is one INSERT ... ON CONFLICT DO UPDATE ... WHERE
-- sent < allowance, so concurrent takers never go past the allowance.
CREATE TABLE ip_warmup_day (
    address_id uuid NOT NULL REFERENCES ip_address (id),
    day        date NOT NULL,
    sent       bigint NOT NULL CHECK (sent >= 0),
    -- The day's allowance as of the latest take; NULL: no limit (the
    -- schedule is over or the address is not warming up).
    allowance  bigint CHECK (allowance >= 0),
    -- How many the latest take granted: the one UPDATE that grants also
    -- says how much, as RETURNING sees only the new row.
    last_take  bigint NOT NULL CHECK (last_take >= 0),
    PRIMARY KEY (address_id, day)
);

-- +goose Down
DROP TABLE ip_warmup_day;
ALTER TABLE ip_address DROP COLUMN warmup_started_at;

-- +goose Up
-- Account health: each team's bounce and complaint rates over the rolling
-- window (POSTHASTE_HEALTH_WINDOW) as the last evaluation found them, when
-- each rate went above its threshold (NULL while under it: a crossing is
-- noticed once), and whether its sending is paused (POSTHASTE_HEALTH_PAUSE).
-- The send path reads only paused_at, by primary key.
CREATE TABLE team_health (
    team_id             uuid PRIMARY KEY REFERENCES team (id) ON DELETE CASCADE,
    evaluated_at        timestamptz NOT NULL,
    window_seconds      bigint NOT NULL CHECK (window_seconds > 0),
    delivered           bigint NOT NULL DEFAULT 0,
    bounced             bigint NOT NULL DEFAULT 0,
    complained          bigint NOT NULL DEFAULT 0,
    bounce_warned_at    timestamptz,
    complaint_warned_at timestamptz,
    paused_at           timestamptz,
    paused_metric       text CHECK (paused_metric IN ('bounce', 'complaint')),
    paused_rate         double precision,
    paused_threshold    double precision,
    paused_window_seconds bigint,
    resumed_at          timestamptz,
    CONSTRAINT team_health_pause CHECK ((paused_at IS NULL) = (paused_metric IS NULL)
        AND (paused_at IS NULL) = (paused_rate IS NULL)
        AND (paused_at IS NULL) = (paused_threshold IS NULL)
        AND (paused_at IS NULL) = (paused_window_seconds IS NULL))
);

-- +goose Down
DROP TABLE team_health;

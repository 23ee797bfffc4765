package dashboard

import (
	"context"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/health"
)

// healthSection is the Metrics page's account health: the team's bounce
// and complaint rates over the health window, against Resend's thresholds,
// and whether its sending is paused (templates/partials_health.html).
type healthSection struct {
	Window string // "30 days"
	Rates  []healthRate
	// Paused is the reason sending is refused, "" when it is not.
	Paused string
}

type healthRate struct {
	Metric    string // bounce or complaint
	Rate      string // "1.20 %"
	Threshold string // "4.00 %"
	Events    int64  // bounced or complained recipients
	Of        int64  // the rate's base
	OfLabel   string // what Of counts
	// Judged is false below the minimum volume: the rate is shown, not
	// judged.
	Judged bool
	// Over: judged and above the threshold.
	Over bool
	// Need is the volume at which the rate will be judged.
	Need int64
}

// health returns the team's account health: its rates counted now over
// the window of its last evaluation (health.DefaultWindow before the
// first), its pause as stored (usage.Service.Health).
func (h *overviewHandler) health(ctx context.Context, team uuid.UUID) (healthSection, error) {
	th, err := h.usage.Health(ctx, team, h.now())
	if err != nil {
		return healthSection{}, err
	}
	c := th.Counts
	s := healthSection{Window: health.Days(th.Window)}
	if th.Paused != nil {
		s.Paused = th.Paused.Message()
	}
	for _, m := range []health.Metric{health.Bounce, health.Complaint} {
		r := healthRate{Metric: string(m), Rate: health.Percent(c.Rate(m)), Threshold: health.Percent(health.Threshold(m)),
			Judged: c.Judged(m), Over: c.Over(m)}
		if m == health.Bounce {
			r.Events, r.Of, r.OfLabel, r.Need = c.Bounced, c.Sent(), "delivered or bounced", health.MinVolume
		} else {
			r.Events, r.Of, r.OfLabel, r.Need = c.Complained, c.Delivered, "delivered", int64(1/health.Threshold(m)+0.5)
		}
		s.Rates = append(s.Rates, r)
	}
	return s, nil
}

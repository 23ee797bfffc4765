package contract

import "time"

// CheckAccountHealthName is the registered name of the activity of
// AccountHealth.
const CheckAccountHealthName = "CheckAccountHealth"

// CheckAccountHealthInput configures one evaluation: the window over
// which the rates are counted (POSTHASTE_HEALTH_WINDOW) and whether a
// crossing of the pause threshold pauses the team's sending
// (POSTHASTE_HEALTH_PAUSE).
type CheckAccountHealthInput struct {
	Window time.Duration
	Pause  bool
}

// CheckAccountHealthResult counts what one evaluation did.
type CheckAccountHealthResult struct {
	Crossed int // crossings this evaluation stored
	Sent    int // pending notices sent (or replayed) and marked
	Failed  int // pending notices left for the next evaluation
}

package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// usageWindowJSON is one window of GET /usage's emails: Posthaste counts
// only sent recipients against its quota (used = sent); received mail is
// counted but never limited.
type usageWindowJSON struct {
	Used     int64  `json:"used"`
	Limit    *int64 `json:"limit"`
	Sent     int64  `json:"sent"`
	Received int64  `json:"received"`
	ResetsAt string `json:"resets_at"`
}

type usageCountJSON struct {
	Used  int64  `json:"used"`
	Limit *int64 `json:"limit"`
}

// usageJSON is GET /usage in the shape of the Node SDK's
// GetUsageResponseSuccess. A null limit means no cap; Posthaste has no
// AI credits and no automations (used 0; automation_runs.limit 0).
type usageJSON struct {
	Object      string `json:"object"`
	GeneratedAt string `json:"generated_at"`
	Emails      struct {
		Daily   usageWindowJSON `json:"daily"`
		Monthly usageWindowJSON `json:"monthly"`
	} `json:"emails"`
	Contacts   usageCountJSON `json:"contacts"`
	Segments   usageCountJSON `json:"segments"`
	Broadcasts usageCountJSON `json:"broadcasts"`
	AICredits  struct {
		Used           int64   `json:"used"`
		Limit          *int64  `json:"limit"`
		NextIncreaseAt *string `json:"next_increase_at"`
	} `json:"ai_credits"`
	AutomationRuns struct {
		Used     int64  `json:"used"`
		Limit    int64  `json:"limit"`
		ResetsAt string `json:"resets_at"`
	} `json:"automation_runs"`
	Domains   usageCountJSON `json:"domains"`
	RateLimit struct {
		Limit    int    `json:"limit"`
		Duration string `json:"duration"`
	} `json:"rate_limit"`
}

// getUsage answers GET /usage: the team's use of what its plan allows.
func (s *emailsAPI) getUsage(c *gin.Context) {
	u, err := s.usage.Usage(c.Request.Context(), principal(c).TeamID, time.Now())
	if err != nil {
		s.respondError(c, err)
		return
	}
	var j usageJSON
	j.Object, j.GeneratedAt = "usage", formatTime(u.At)
	j.Emails.Daily = usageWindowJSON{Used: u.DaySent, Sent: u.DaySent, Received: u.DayReceived,
		ResetsAt: formatTime(u.DayEnd)}
	j.Emails.Monthly = usageWindowJSON{Used: u.MonthUsed, Limit: &u.PlanEmails, Sent: u.MonthUsed,
		Received: u.MonthReceived, ResetsAt: formatTime(u.MonthEnd)}
	j.Contacts.Used, j.Segments.Used, j.Broadcasts.Used, j.Domains.Used = u.Contacts, u.Segments, u.Broadcasts, u.Domains
	j.AutomationRuns.ResetsAt = formatTime(u.MonthEnd)
	// The rate the limiter applies to the team (limits.go).
	j.RateLimit.Limit, j.RateLimit.Duration = s.defaultRate, "1s"
	if u.RateLimit > 0 {
		j.RateLimit.Limit = u.RateLimit
	}
	c.PureJSON(http.StatusOK, j)
}

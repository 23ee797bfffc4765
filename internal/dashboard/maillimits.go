package dashboard

import (
	"time"

	"github.com/posthaste/posthaste/internal/store"
)

// MailLimits bound the emails the dashboard sends through Config.Mailer, so
// that neither a team nor anyone asking for password resets can drain the
// system sender's quota or flood an address. The counts are kept in
// PostgreSQL (account.Members.Invite and ReserveResetMail), shared by
// every process, over the last hour. Zero fields take the defaults.
type MailLimits struct {
	// TeamInvitations is how many invitation emails one team sends per
	// hour (default 20).
	TeamInvitations int
	// PerAddress is how many invitation and password-reset emails, from
	// every team, one address receives per hour (default 5).
	PerAddress int
}

// Defaults of MailLimits.
const (
	defaultTeamInvitations = 20
	defaultMailsPerAddress = 5
	mailLimitWindow        = time.Hour
)

// mailLimits are Config.MailLimits with the defaults filled in.
func (h *Handler) mailLimits() store.SystemMailLimits {
	l := store.SystemMailLimits{Window: mailLimitWindow, PerTeam: h.cfg.MailLimits.TeamInvitations,
		PerAddress: h.cfg.MailLimits.PerAddress}
	if l.PerTeam <= 0 {
		l.PerTeam = defaultTeamInvitations
	}
	if l.PerAddress <= 0 {
		l.PerAddress = defaultMailsPerAddress
	}
	return l
}

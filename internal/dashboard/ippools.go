package dashboard

import (
	"net/http"
	"strconv"
	"time"

	"github.com/posthaste/posthaste/internal/ippool"
	"github.com/posthaste/posthaste/internal/store"
)

// Warm-up states of an address on the IP pools page.
const (
	warmupWarming = "warming"
	warmupDone    = "done"
	warmupRetired = "retired"
)

type ipPoolsData struct {
	Owner    bool
	Schedule string // the warm-up schedule in words
	Overflow string
	Pools    []ipPoolView
}

type ipPoolView struct {
	Name      string
	Default   bool
	Addresses []ipAddressView
}

type ipAddressView struct {
	IP, EHLOName string
	State        string // warmupWarming, warmupDone or warmupRetired
	Day          string // "3 of 11" while warming, else ""
	Allowance    string // today's allowance; "no limit" once done
	Sent         int64  // messages that took the address today (UTC)
}

// ipPools is the IP pools page, for the team's owners: the pools its mail
// can leave from (the default pool, shared by every team, and the pools
// assigned to the team or its domains; another team's dedicated pool is
// never shown), each address with its EHLO name and where its warm-up
// stands today (UTC): its day of the schedule, today's allowance and the
// messages that took it so far. A pool that never had an address is not
// listed.
func (h *domainsHandler) ipPools(w http.ResponseWriter, r *http.Request, se *store.Session) {
	d := ipPoolsData{Schedule: scheduleText(h.cfg.Warmup), Overflow: h.cfg.WarmupOverflow}
	members, err := h.accounts.Members.Members(r.Context(), se.TeamID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, m := range members {
		d.Owner = d.Owner || (m.UserID == se.UserID && m.Role == "owner")
	}
	if d.Owner {
		now := h.now()
		addrs, err := h.domainSvc.PoolAddresses(r.Context(), se.TeamID, h.cfg.DefaultPool, now)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for _, a := range addrs {
			if n := len(d.Pools); n == 0 || d.Pools[n-1].Name != a.Pool {
				d.Pools = append(d.Pools, ipPoolView{Name: a.Pool, Default: a.Pool == h.cfg.DefaultPool})
			}
			p := &d.Pools[len(d.Pools)-1]
			p.Addresses = append(p.Addresses, addressView(a, h.cfg.Warmup, now))
		}
	}
	h.render(w, http.StatusOK, "ippools", view{Title: "IP pools", Nav: "ippools", Session: se, CSRF: se.CSRFToken, Data: d})
}

func addressView(a store.WarmupAddress, s ippool.Schedule, now time.Time) ipAddressView {
	v := ipAddressView{IP: a.IP.String(), EHLOName: a.EHLOName, Sent: a.Sent, State: warmupDone, Allowance: "no limit"}
	if a.RetiredAt != nil {
		v.State, v.Allowance = warmupRetired, "—"
		return v
	}
	if a.StartedAt == nil {
		return v
	}
	day := max(ippool.WarmupDay(*a.StartedAt, now), 1)
	if n, limited := s.Allowance(day); limited {
		v.State = warmupWarming
		v.Day = strconv.Itoa(day) + " of " + strconv.Itoa(len(s))
		v.Allowance = strconv.FormatInt(n, 10)
	}
	return v
}

// scheduleText says a warm-up schedule in words.
func scheduleText(s ippool.Schedule) string {
	if len(s) == 0 {
		return "off: new addresses send without limit"
	}
	const shown = 6
	text := ""
	for i, n := range s {
		if i == shown && len(s) > shown+1 {
			text += ", …, " + strconv.FormatInt(s[len(s)-1], 10)
			break
		}
		if i > 0 {
			text += ", "
		}
		text += strconv.FormatInt(n, 10)
	}
	return text + " messages on days 1 to " + strconv.Itoa(len(s)) + " (UTC), then no limit"
}

package dashboard

// WaitBackground waits until the password-reset emails being sent are out.
func (h *Handler) WaitBackground() { h.background.Wait() }

// SignInRank is how many sign-ins from addr the password pool ranks by.
func (h *Handler) SignInRank(addr string) int {
	_, address, _ := signInKeys("", addr)
	return h.throttle.Count(rankKey(address), h.now())
}

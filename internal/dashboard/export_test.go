package dashboard

// WaitBackground waits until the password-reset emails being sent are out.
func (h *Handler) WaitBackground() { h.background.Wait() }

package contract

// Registered names of the activities of VerifyDomain.
const (
	CheckDomainName     = "CheckDomain"
	SetDomainStatusName = "SetDomainStatus"
)

// Domain statuses (the values of store.Domain.Status).
const (
	DomainPending           = "pending"
	DomainVerified          = "verified"
	DomainPartiallyVerified = "partially_verified"
	DomainFailed            = "failed"
	DomainTemporaryFailure  = "temporary_failure"
)

// CheckDomainInput names the domain whose records to look up.
type CheckDomainInput struct{ DomainID string }

// RecordCheck is the outcome of looking one record up.
type RecordCheck struct {
	Key       string // records.KeyDKIM, ...
	Required  bool   // DKIM and SPF records are; DMARC is not
	Found     bool
	Temporary bool // the lookup failed (timeout, SERVFAIL), so the record may still be there
}

// CheckDomainResult reports a domain's records, or that it was deleted.
type CheckDomainResult struct {
	Deleted bool
	Records []RecordCheck
}

// SetDomainStatusInput is the outcome of a verification step.
type SetDomainStatusInput struct {
	DomainID string
	Status   string
	Records  map[string]string // record key → status
}

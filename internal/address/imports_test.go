package address_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// acceptsMail are the packages that hand mail to internal/submit: the
// adapters that accept it (API, SMTP gateway, dashboard, broadcasts), the
// wiring in cmd and the benchmarks, and the automations whose send_email
// steps send through it. internal/health/notices reads the
// submit.Error of the notices it has the system mailer accept.
var acceptsMail = map[string]bool{
	"api": true, "smtpgw": true, "cmd/posthaste": true, "internal/dashboard": true,
	"internal/broadcast": true, "internal/automations": true, "internal/health/notices": true, "bench": true,
}

// TestOnlyMailAcceptorsImportSubmit: reading an address needs
// internal/address, not internal/submit; a package that does not accept
// mail and imports internal/submit fails this test.
func TestOnlyMailAcceptorsImportSubmit(t *testing.T) {
	const module = "github.com/posthaste/posthaste/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		pkg = strings.TrimPrefix(pkg, module)
		if pkg == "internal/submit" || acceptsMail[pkg] {
			continue
		}
		require.NotContains(t, strings.Fields(imports), module+"internal/submit",
			"%s imports internal/submit; read addresses with internal/address", pkg)
	}
}

package insights

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	spamStatus = regexp.MustCompile(`(?m)^X-Spam-Status: .*(?:\n[ \t].*)*`)
	spamScore  = regexp.MustCompile(`score=(-?[0-9.]+) required=[0-9.]+ tests=(\S*)`)
	fixtureID  = regexp.MustCompile(`(?mi)^Message-ID: <([^>]+)\.fixture@example\.com>`)
)

// TestSpamAssassinScores runs Debian's spamassassin over every fixture
// with local rules only (-L: no DNS blocklists, Razor or Pyzor; no Bayes)
// and logs its score beside our findings. It asserts our findings, not
// SpamAssassin's verdict: the score is there to compare.
func TestSpamAssassinScores(t *testing.T) {
	sa, err := exec.LookPath("spamassassin")
	require.NoError(t, err, "spamassassin is missing: install it with: sudo apt-get install -y spamassassin")
	// One run over an mbox of every fixture: spamassassin takes seconds to
	// load its rules.
	var mbox bytes.Buffer
	for _, tc := range cases {
		raw, err := os.ReadFile(filepath.Join("testdata", tc.name+".eml"))
		require.NoError(t, err)
		mbox.WriteString("From fixture@example.com Wed Nov 25 01:00:00 2026\n")
		for _, line := range strings.Split(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n") {
			if strings.HasPrefix(line, "From ") {
				line = ">" + line
			}
			mbox.WriteString(line + "\n")
		}
	}
	cmd := exec.Command(sa, "--local", "--mbox", "--cf", "use_bayes 0", "--cf", "bayes_auto_learn 0",
		"--cf", "report_safe 0")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	cmd.Stdin = &mbox
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "spamassassin: %s", stderr.String())

	scores := map[string][2]string{} // fixture → score, tests
	for _, msg := range regexp.MustCompile(`(?m)^From `).Split(string(out), -1) {
		id := fixtureID.FindStringSubmatch(msg)
		// Unfolded, the tests are one comma-separated word.
		status := strings.Join(strings.Fields(strings.ReplaceAll(spamStatus.FindString(msg), ",", ", ")), " ")
		st := spamScore.FindStringSubmatch(strings.ReplaceAll(status, ", ", ","))
		if id == nil || st == nil {
			continue
		}
		scores[id[1]] = [2]string{st[1], st[2]}
	}
	for _, tc := range cases {
		fs := Check(tc.message())
		require.Equal(t, tc.want, contains(fs, tc.code), "%s: findings %v", tc.name, codes(fs))
		s, ok := scores[tc.name]
		require.True(t, ok, "no SpamAssassin verdict for %s in its output", tc.name)
		t.Logf("%-22s spamassassin %5s  ours %-40s  (sa tests: %s)", tc.name, s[0], strings.Join(codes(fs), ","), s[1])
	}
}

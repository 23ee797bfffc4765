package tracking

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	const chrome = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) " +
		"Chrome/120.0.0.0 Safari/537.36"
	const gmail = "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)"
	delivered := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	home := netip.MustParseAddr("203.0.113.7")
	for _, tc := range []struct {
		name    string
		hit     Hit
		machine bool
		reason  string
	}{
		{"person opens", Hit{Kind: Open, Method: "GET", UserAgent: chrome, IP: home,
			At: delivered.Add(time.Hour), Delivered: delivered}, false, ""},
		{"person clicks", Hit{Kind: Click, Method: "GET", UserAgent: chrome, IP: home,
			At: delivered.Add(time.Minute), Delivered: delivered}, false, ""},
		{"click, delivery unknown", Hit{Kind: Click, Method: "GET", UserAgent: chrome, IP: home,
			At: delivered}, false, ""},
		{"head click", Hit{Kind: Click, Method: "HEAD", UserAgent: chrome, IP: home,
			At: delivered.Add(time.Hour), Delivered: delivered}, true, ReasonHead},
		{"head open", Hit{Kind: Open, Method: "HEAD", UserAgent: chrome}, true, ReasonHead},
		{"no user agent", Hit{Kind: Click, Method: "GET", UserAgent: "  "}, true, ReasonNoUserAgent},
		{"apple privacy user agent", Hit{Kind: Open, Method: "GET", UserAgent: "Mozilla/5.0",
			IP: netip.MustParseAddr("104.28.1.1")}, true, ReasonApplePrivacy},
		{"apple network", Hit{Kind: Open, Method: "GET", UserAgent: chrome,
			IP: netip.MustParseAddr("17.58.1.2")}, true, ReasonApplePrivacy},
		{"apple network, mapped", Hit{Kind: Open, Method: "GET", UserAgent: chrome,
			IP: netip.MustParseAddr("::ffff:17.58.1.2")}, true, ReasonApplePrivacy},
		{"gmail proxy on arrival", Hit{Kind: Open, Method: "GET", UserAgent: gmail,
			At: delivered.Add(5 * time.Second), Delivered: delivered}, true, ReasonProxyPrefetch},
		{"gmail proxy later: the person opened", Hit{Kind: Open, Method: "GET", UserAgent: gmail,
			At: delivered.Add(time.Hour), Delivered: delivered}, false, ""},
		{"gmail proxy, delivery unknown", Hit{Kind: Open, Method: "GET", UserAgent: gmail}, false, ""},
		{"scanner", Hit{Kind: Click, Method: "GET", UserAgent: "Barracuda Sentinel (EE)",
			At: delivered.Add(time.Hour), Delivered: delivered}, true, ReasonScanner},
		{"mimecast open", Hit{Kind: Open, Method: "GET", UserAgent: "Mimecast-URL-Protect/1.0"}, true, ReasonScanner},
		{"bot", Hit{Kind: Click, Method: "GET", UserAgent: "Mozilla/5.0 (compatible; Googlebot/2.1)"},
			true, ReasonScanner},
		{"http library", Hit{Kind: Click, Method: "GET", UserAgent: "python-requests/2.31"}, true, ReasonScanner},
		{"curl", Hit{Kind: Open, Method: "GET", UserAgent: "curl/8.5.0"}, true, ReasonScanner},
		{"click on arrival", Hit{Kind: Click, Method: "GET", UserAgent: chrome,
			At: delivered.Add(ClickWindow), Delivered: delivered}, true, ReasonTooSoon},
		{"click just after the window", Hit{Kind: Click, Method: "GET", UserAgent: chrome,
			At: delivered.Add(ClickWindow + time.Millisecond), Delivered: delivered}, false, ""},
		{"open on arrival is a person's", Hit{Kind: Open, Method: "GET", UserAgent: chrome,
			At: delivered.Add(time.Second), Delivered: delivered}, false, ""},
		{"apple bare user agent on a click", Hit{Kind: Click, Method: "GET", UserAgent: "Mozilla/5.0",
			At: delivered.Add(time.Hour), Delivered: delivered}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			machine, reason := Classify(tc.hit)
			require.Equal(t, tc.machine, machine)
			require.Equal(t, tc.reason, reason)
		})
	}
}

package tracking

import (
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Hit is one request to a tracking endpoint, as Classify sees it.
type Hit struct {
	Kind      Kind
	Method    string // GET or HEAD
	UserAgent string
	IP        netip.Addr // the client's address; the zero Addr when unknown
	At        time.Time  // when the request came
	// Delivered is when the recipient's mail was delivered; the zero Time
	// when unknown.
	Delivered time.Time
}

// Reasons a hit is a machine's, as Classify returns them.
const (
	ReasonHead          = "head_request"
	ReasonNoUserAgent   = "no_user_agent"
	ReasonScanner       = "scanner_user_agent"
	ReasonApplePrivacy  = "apple_mail_privacy_protection"
	ReasonProxyPrefetch = "image_proxy_prefetch"
	ReasonTooSoon       = "click_too_soon_after_delivery"
)

// ClickWindow is how soon after delivery a click is taken for a link
// scanner's: no person opens a message and clicks a link in it that fast.
const ClickWindow = 2 * time.Second

// PrefetchWindow is how soon after delivery a webmail image proxy's fetch
// of the pixel is taken for a prefetch on arrival rather than an open.
const PrefetchWindow = 30 * time.Second

// appleNet is Apple's 17.0.0.0/8, from which Mail Privacy Protection
// fetches remote content.
var appleNet = netip.MustParsePrefix("17.0.0.0/8")

// imageProxies are user agent parts of the webmail image proxies, which
// fetch images when the message is opened, but sometimes on arrival too.
var imageProxies = []string{"googleimageproxy", "yahoomailproxy", "ymailproxy"}

// scanners are user agent parts (lower case) of mail security scanners,
// link checkers, crawlers and HTTP libraries: no person reads mail
// through them.
var scanners = []string{
	"bot", "crawler", "spider", "scanner", "preview",
	"barracuda", "mimecast", "proofpoint", "messagelabs", "symantec", "trendmicro", "forcepoint",
	"sophos", "fortiguard", "fortinet", "ironport", "zscaler", "cisco", "safelinks", "checkpoint",
	"facebookexternalhit", "slack", "discord", "whatsapp", "telegram", "skypeuripreview",
	"headlesschrome", "phantomjs", "python-", "python/", "curl/", "wget/", "go-http-client", "java/",
	"okhttp", "libwww", "httpclient", "axios/", "node-fetch", "aiohttp", "ruby", "perl",
}

// Classify says whether a hit is a machine's rather than a person's, and
// why (one of the Reason constants). A machine's hit is still recorded,
// marked as such, and not counted as a person's open or click.
func Classify(h Hit) (machine bool, reason string) {
	if h.Method == http.MethodHead {
		return true, ReasonHead
	}
	ua := strings.TrimSpace(h.UserAgent)
	if ua == "" {
		return true, ReasonNoUserAgent
	}
	lower := strings.ToLower(ua)
	if h.Kind == Open {
		// Mail Privacy Protection fetches remote content of every message
		// on arrival, from Apple's network, with a bare user agent.
		if ua == "Mozilla/5.0" || (h.IP.IsValid() && appleNet.Contains(h.IP.Unmap())) {
			return true, ReasonApplePrivacy
		}
		for _, p := range imageProxies {
			if strings.Contains(lower, p) && within(h, PrefetchWindow) {
				return true, ReasonProxyPrefetch
			}
		}
	}
	for _, s := range scanners {
		if strings.Contains(lower, s) {
			return true, ReasonScanner
		}
	}
	if h.Kind == Click && within(h, ClickWindow) {
		return true, ReasonTooSoon
	}
	return false, ""
}

// within says whether h came at most d after the delivery it follows.
func within(h Hit, d time.Duration) bool {
	if h.Delivered.IsZero() || h.At.IsZero() {
		return false
	}
	return h.At.Sub(h.Delivered) <= d
}

package postfixtest

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
)

// mainCF is the instance's main.cf: its own directories, relaying for
// loopback clients only, no alias or local recipient lookups (every
// mailbox of the domain is accepted at RCPT), logging into a file of its
// own (through postlogd), then cfg.Main.
func mainCF(dir, host string, cfg Config) []byte {
	// Only master.cf's address is listened on either way; "all" for
	// another address than 127.0.0.1 because Postfix refuses one that no
	// interface carries by name (127.0.0.4 is only lo's 127.0.0.0/8).
	interfaces := "loopback-only"
	if host != "127.0.0.1" {
		interfaces = "all"
	}
	params := [][2]string{
		{"compatibility_level", "3.6"},
		{"config_directory", filepath.Join(dir, "etc")},
		{"queue_directory", filepath.Join(dir, "queue")},
		{"data_directory", filepath.Join(dir, "data")},
		{"mail_owner", "postfix"},
		{"setgid_group", "postdrop"},
		{"myhostname", "postfix." + cfg.Domain},
		{"mydomain", cfg.Domain},
		{"myorigin", cfg.Domain},
		{"mydestination", cfg.Domain},
		{"mynetworks", "127.0.0.0/8"},
		{"inet_interfaces", interfaces},
		{"inet_protocols", "ipv4"},
		{"smtpd_relay_restrictions", "permit_mynetworks, reject_unauth_destination"},
		{"alias_maps", ""},
		{"alias_database", ""},
		{"local_recipient_maps", ""},
		{"biff", "no"},
		{"maillog_file", filepath.Join(dir, "maillog")},
		{"maillog_file_prefixes", dir},
	}
	set := make(map[string]bool, len(cfg.Main))
	for i, p := range params {
		if v, ok := cfg.Main[p[0]]; ok {
			params[i][1] = v
			set[p[0]] = true
		}
	}
	keys := make([]string, 0, len(cfg.Main))
	for k := range cfg.Main {
		if !set[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		params = append(params, [2]string{k, cfg.Main[k]})
	}
	var b bytes.Buffer
	b.WriteString("# A throwaway instance (internal/postfixtest).\n")
	for _, p := range params {
		fmt.Fprintf(&b, "%s = %s\n", p[0], p[1])
	}
	return b.Bytes()
}

// masterCF is the instance's master.cf: smtpd on addr, the daemons that
// queueing, bouncing and logging need, none chrooted, then services.
func masterCF(addr string, services []string) []byte {
	var b bytes.Buffer
	b.WriteString(`# service type private unpriv chroot wakeup maxproc command
` + addr + ` inet n - n - - smtpd
cleanup   unix n - n - 0 cleanup
qmgr      unix n - n 300 1 qmgr
rewrite   unix - - n - - trivial-rewrite
bounce    unix - - n - 0 bounce
defer     unix - - n - 0 bounce
trace     unix - - n - 0 bounce
verify    unix - - n - 1 verify
flush     unix n - n - 0 flush
proxymap  unix - - n - - proxymap
showq     unix n - n - - showq
error     unix - - n - - error
retry     unix - - n - - error
anvil     unix - - n - 1 anvil
scache    unix - - n - 1 scache
postlog   unix-dgram n - n - 1 postlogd
`)
	for _, s := range services {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

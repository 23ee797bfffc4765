#!/usr/bin/python3
"""Evaluate SPF for a message's envelope with pyspf.

Usage: spfcheck.py HOST:PORT CLIENT_IP MAIL_FROM HELO

Every lookup goes to the DNS server on HOST:PORT (the test's). Prints the
result ("pass", "softfail", ...) and its explanation; exits 0 on pass.
"""
import sys

import dns.resolver
import spf


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = [host]
    resolver.port = int(port)
    dns.resolver.default_resolver = resolver
    result, explanation = spf.check2(i=sys.argv[2], s=sys.argv[3], h=sys.argv[4])
    print(result, explanation)
    sys.exit(0 if result == "pass" else 1)


if __name__ == "__main__":
    main()

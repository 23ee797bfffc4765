#!/usr/bin/python3
"""Verify the DKIM signature of the message on stdin with dkimpy.

Usage: dkimverify.py HOST:PORT

Public keys are looked up over DNS on HOST:PORT (the test's DNS server)
with dnspython. Prints "pass" and exits 0 when the signature verifies;
prints "fail" (exit 1) or the error (exit 2) otherwise.
"""
import logging
import sys

import dkim
import dns.resolver


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = [host]
    resolver.port = int(port)

    def lookup(name, timeout=5):
        if isinstance(name, bytes):
            name = name.decode("ascii")
        try:
            answer = resolver.resolve(name, "TXT", lifetime=timeout)
        except Exception:
            return None
        # A provider may split a long value into several strings; RFC 6376
        # §3.6.2.2 joins them.
        for rdata in answer:
            return b"".join(rdata.strings)
        return None

    logging.basicConfig(stream=sys.stderr, level=logging.INFO)
    msg = sys.stdin.buffer.read()
    try:
        ok = dkim.verify(msg, logger=logging.getLogger("dkim"), dnsfunc=lookup)
    except Exception as e:  # dkimpy raises on malformed signatures
        print("error: %s" % e)
        sys.exit(2)
    print("pass" if ok else "fail")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

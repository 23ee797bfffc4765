#!/usr/bin/env bash
# Runs every test: go vet, unit and workflow tests, store and API tests on a
# private PostgreSQL, and the end-to-end tests of ./cmd/posthaste (which
# verify DKIM and SPF with Debian's python3-dkim and python3-spf and submit
# over SMTP with Debian's swaks and Python's smtplib, and run a throwaway
# Postfix as a recipient's MX that bounces to our return path), which
# link the embedded Temporal server (internal/devstack, whose own tests
# run with them) and run without -race because a race build of that server
# is too slow. The browser test drives Debian's Chromium and leaves
# screenshots in .artifacts/screenshots.
# The API's SDK test runs Resend's Node SDK, installed with npm ci into
# api/testdata/resend-node.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup.sh
need_postgres
need_browser
need_python_mail
need_redis
need_swaks
need_spamassassin
need_postfix
need_node_resend

go vet ./...
(cd third_party/go-smtp && go test -count=1 ./) # the patched go-smtp copy
pkgs=$(go list ./... | grep -v -e '/cmd/posthaste$' -e '/internal/devstack$')
go test -race -count=1 -timeout 15m $pkgs
go test -count=1 -timeout 20m ./cmd/posthaste/ ./internal/devstack/

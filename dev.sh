#!/usr/bin/env bash
# Runs Posthaste on embedded defaults: builds bin/posthaste and starts
# `posthaste dev` (embedded Temporal with its UI, a private PostgreSQL
# under ./.posthaste, the API on :3000). Extra arguments are ignored;
# configure with the environment variables of docs/configuration.md.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup.sh
need_postgres
echo "posthaste: building bin/posthaste (the first build takes several minutes)" >&2
go build -o bin/posthaste ./cmd/posthaste
exec bin/posthaste dev

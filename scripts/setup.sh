# Sourced by dev.sh and test.sh: makes sure the tools Posthaste needs are
# installed, installing Debian packages when it can, or says exactly what
# to install.
set -euo pipefail

export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

need_go="1.26.8"

die() { echo "posthaste: $*" >&2; exit 1; }

if ! command -v go >/dev/null 2>&1; then
  for d in /usr/local/go/bin "$HOME/go/bin"; do
    if [ -x "$d/go" ]; then PATH="$d:$PATH"; fi
  done
fi
command -v go >/dev/null 2>&1 ||
  die "Go $need_go or newer is required and was not found. Install it from https://go.dev/dl/ (go$need_go.linux-amd64.tar.gz into /usr/local/go) and put /usr/local/go/bin on PATH."
have_go="$(go env GOVERSION | sed 's/^go//')"
if [ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -n1)" != "$need_go" ]; then
  die "Go $need_go or newer is required; this machine has $have_go. Install a newer Go from https://go.dev/dl/."
fi

# apt_install PKG... installs Debian packages, as root or through sudo.
apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo"; else
      die "missing Debian packages: ${missing[*]}. Install them with: sudo apt-get install -y ${missing[*]}"
    fi
  fi
  command -v apt-get >/dev/null 2>&1 ||
    die "missing packages: ${missing[*]} (and no apt-get here). Install their equivalents for your system."
  echo "posthaste: installing ${missing[*]}" >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# PostgreSQL server binaries (initdb, pg_ctl) for the private cluster,
# unless an external database is configured.
need_postgres() {
  if [ -n "${DATABASE_URL:-}" ] || [ -n "${POSTHASTE_TEST_DATABASE_URL:-}" ]; then return 0; fi
  if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then return 0; fi
  apt_install postgresql
}

# Debian's Chromium for the dashboard's browser tests.
need_browser() {
  [ -x /usr/bin/chromium ] && return 0
  apt_install chromium
}

# Debian's dkimpy, pyspf and dnspython: the end-to-end tests check what
# Posthaste sends with independent DKIM and SPF verifiers. They run under
# /usr/bin/python3 (Debian's interpreter), whatever python3 is first on PATH.
need_python_mail() {
  if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import dkim, spf, dns.resolver' >/dev/null 2>&1; then return 0; fi
  apt_install python3-dkim python3-spf python3-dnspython
}

# redis-server: the tests start a private one to check that API processes
# sharing Redis enforce one rate limit.
need_redis() {
  command -v redis-server >/dev/null 2>&1 || apt_install redis-server
}

# swaks: the end-to-end tests submit through the SMTP gateway with it.
# swaks speaks TLS (STARTTLS and implicit TLS) only with Net::SSLeay, a
# package it merely recommends.
need_swaks() {
  apt_install swaks libnet-ssleay-perl
}

# SpamAssassin: the deliverability insights test (internal/insights) prints
# its local-rules score of each fixture beside our findings.
need_spamassassin() {
  command -v spamassassin >/dev/null 2>&1 || apt_install spamassassin
}

# Postfix: the inbound end-to-end test runs a throwaway instance as the
# recipient's MX that bounces to our return path, and the bench compares
# with one accepting into its durable queue. Neither starts the system's
# Postfix.
need_postfix() {
  command -v postfix >/dev/null 2>&1 || [ -x /usr/sbin/postfix ] || apt_install postfix
}

# Node and Resend's official Node SDK (pinned in api/testdata/resend-node)
# for the API's SDK compatibility test.
need_node_resend() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || apt_install nodejs npm
  local dir
  dir="$(dirname "${BASH_SOURCE[0]}")/../api/testdata/resend-node"
  [ -d "$dir/node_modules/resend" ] && return 0
  npm ci --prefix "$dir" --no-audit --no-fund >/dev/null
}

go mod download

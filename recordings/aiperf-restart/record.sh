#!/usr/bin/env bash
# run 2: aiperf at 1 req/s (max 4 in flight) for 110 s against :8011; ~20 s in, instance-1 is
# stopped (SIGTERM to its process group, SIGKILL after 10 s) and started again on the same port.
cd /srv/llm/drafts/aiperf-smx
now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
log() { echo "$(now) [lab] $*" >> lab-timeline.log; }
CMD="/srv/llm/aiperf-venv/bin/aiperf profile --model tiny-llama --url http://127.0.0.1:8011 --endpoint-type chat --streaming --tokenizer /srv/llm/tiny-llama --concurrency 4 --request-rate 1 --benchmark-duration 110 --benchmark-grace-period 15 --prompt-input-tokens-mean 256 --prompt-input-tokens-stddev 0 --prompt-output-tokens-mean 64 --prompt-output-tokens-stddev 0 --extra-inputs ignore_eos:true --server-metrics http://127.0.0.1:8011/metrics --server-metrics-formats jsonl parquet json csv --export-http-trace --random-seed 7 --ui-type none --no-auto-plot --output-artifact-dir /srv/llm/drafts/aiperf-smx/aiperf-restart"
echo "$CMD" > command-restart.txt
log "aiperf run 2 (restart) start"
timeout 300 $CMD > client-stdout-restart.log 2>&1 &
AP=$!
sleep 20
OLD=$(cat inst.pid)
log "stopping instance-1 (SIGTERM to process group $OLD) mid-run"
kill -TERM -- -$OLD
for i in $(seq 1 20); do kill -0 $OLD 2>/dev/null || break; sleep 0.5; done
kill -KILL -- -$OLD 2>/dev/null && log "SIGKILL sent to group $OLD"
while ss -ltn | grep -q '127.0.0.1:8011 '; do sleep 0.2; done
log "port 8011 free; starting instance-1 again"
env VLLM_TARGET_DEVICE=cpu VLLM_HOST_IP=127.0.0.1 VLLM_CPU_OMP_THREADS_BIND=0 \
  setsid /srv/llm/vllmcpu/bin/vllm serve /srv/llm/tiny-llama --served-model-name tiny-llama --load-format dummy --dtype bfloat16 --max-model-len 1024 --host 127.0.0.1 --port 8011 > instance-1-restarted.log 2>&1 &
echo $! > inst.pid
log "started again (pid $(cat inst.pid))"
for i in $(seq 1 240); do [ "$(curl -s -o /dev/null -w '%{http_code}' 127.0.0.1:8011/health)" = 200 ] && { log "instance-1 healthy again"; break; }; sleep 0.5; done
wait $AP; echo "rc=$?" >> client-stdout-restart.log
log "aiperf run 2 end"

#!/usr/bin/env bash
# ten requests to the instance on :8011 (curl), for the OTLP span sample
U=http://127.0.0.1:8011
chat() {  # id max_tokens [curl args]
  local id=$1 mt=$2; shift 2
  curl -s -o "resp-$id.json" -w "$id %{http_code} %{time_total}\n" "$@" -H 'Content-Type: application/json' \
    -H "X-Request-Id: $id" "$U/v1/chat/completions" \
    -d "{\"model\":\"tiny-llama\",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story ($id)\"}],\"max_tokens\":$mt,\"temperature\":0,\"ignore_eos\":true}"
}
for i in 1 2 3 4; do chat otel-short-$i 8 & done
wait
for i in 1 2 3; do chat otel-long-$i 64 & done
chat otel-abort-1 400 -m 3 &
curl -s -o resp-completion.json -w "completion %{http_code} %{time_total}\n" -H 'Content-Type: application/json' \
  "$U/v1/completions" -d '{"model":"tiny-llama","prompt":"Once upon a time","max_tokens":16,"temperature":0,"ignore_eos":true}' &
curl -s -N -o resp-stream.txt -w "stream %{http_code} %{time_total}\n" -H 'Content-Type: application/json' \
  "$U/v1/chat/completions" -d '{"model":"tiny-llama","messages":[{"role":"user","content":"Stream it"}],"max_tokens":16,"temperature":0,"ignore_eos":true,"stream":true}' &
wait

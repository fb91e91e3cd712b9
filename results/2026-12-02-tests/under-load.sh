# The suite with two busy loops keeping both cores busy (issue 69), from any folder, the project's venv set up:
#   bash results/2026-12-02-tests/under-load.sh > results/2026-12-02-tests/under-load-COMMIT.txt 2>&1
cd "$(dirname "$0")/../.." || exit 1
load=${TMPDIR:-/tmp}/under-load-load.txt
rm -f "$load"
python3 -c "while True: pass" & B1=$!
python3 -c "while True: pass" & B2=$!
echo "busy processes: $B1 $B2 (python3 -c 'while True: pass', not niced); commit $(git rev-parse --short HEAD); start $(date -u +%FT%TZ); load $(cat /proc/loadavg)"
( while sleep 60; do echo "load $(date -u +%T) $(cat /proc/loadavg)" >> "$load"; done ) & L=$!
/usr/bin/time -v .venv/bin/python -m pytest -n auto --dist worksteal -p no:cacheprovider
echo "rc $?"
kill $B1 $B2 $L
echo "end $(date -u +%FT%TZ)"
cat "$load"

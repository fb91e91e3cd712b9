# One test that runs a configuration inside the pytest worker (`--no-isolate`), timed at two commits:
# BEFORE, whose tests/conftest.py leaves OMP_WAIT_POLICY unset in the worker, and AFTER, whose sets it
# PASSIVE before torch loads (as bench/__init__.py does in every pipebench process); each 3 times,
# alternating, with two busy loops on both cores, then once each on an idle machine. From the checkout,
# the project's venv set up:
#   bash results/2026-12-02-tests/omp-wait-policy.sh BEFORE AFTER > results/2026-12-02-tests/omp-wait-policy.txt 2>&1
cd "$(dirname "$0")/../.." || exit 1
py=$PWD/.venv/bin/python test=tests/test_budget.py::test_a_cpu_run_prints_its_answer_and_writes_answer_md
for rev in "$1" "$2"; do rm -rf "/tmp/omp-$rev" && mkdir -p "/tmp/omp-$rev" && git archive "$rev" | tar -x -C "/tmp/omp-$rev"; done
one() {   # REV LABEL: the test's call phase, seconds (pytest --durations), in a fresh pytest process
  (cd "/tmp/omp-$1" && env -u OMP_WAIT_POLICY "$py" -m pytest -q -p no:cacheprovider -n 0 --durations=0 --durations-min=0 "$test" 2>&1) \
    | awk -v r="$1" -v l="$2" '/ call /{c=$1} /passed|failed/{s=$0} END{print l, r, "call", c, "|", s}'
}
echo "commit $(git rev-parse --short HEAD); before $1, after $2; start $(date -u +%FT%TZ); load $(cat /proc/loadavg)"
python3 -c "while True: pass" & B1=$!
python3 -c "while True: pass" & B2=$!
for i in 1 2 3; do one "$1" busy; one "$2" busy; done
kill $B1 $B2; sleep 5
echo "busy loops ended $(date -u +%T); load $(cat /proc/loadavg)"
one "$1" idle; one "$2" idle
echo "end $(date -u +%FT%TZ)"

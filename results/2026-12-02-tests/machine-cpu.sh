#!/usr/bin/env bash
# Usage: bash results/2026-12-02-tests/machine-cpu.sh COMMAND...
# Runs COMMAND and then prints, on stderr, its exit code, the machine's CPU seconds over it (/proc/stat's
# first line: user, nice, system, irq, softirq; every process's, not only the command's) and its wall seconds.
read -r _ u n s _ _ irq sirq _ < /proc/stat; before=$((u + n + s + irq + sirq)); t0=$(date +%s.%N)
"$@"; rc=$?
read -r _ u n s _ _ irq sirq _ < /proc/stat; after=$((u + n + s + irq + sirq)); t1=$(date +%s.%N)
python3 -c "import os, sys; print(f'rc {sys.argv[1]} machine CPU {(int(sys.argv[3]) - int(sys.argv[2])) / os.sysconf(\"SC_CLK_TCK\"):.2f} s wall {float(sys.argv[5]) - float(sys.argv[4]):.2f} s')" \
    "$rc" "$before" "$after" "$t0" "$t1" >&2
exit $rc

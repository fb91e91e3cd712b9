# What ran on the GPU machine (one nvidia-h200 lease, 16 cores), from the project root, back to back on one
# warm machine, 2026-12-02 (PIPEBENCH_GIT_COMMIT names the commit: the machine gets a copy of the tree
# without .git). The lease's calls, in order:
#   1-4. DALI's chunks copied to /tmp/dali/ (.devcarry/: ../../bench/plans/on-gpu.sh's header says how they
#        are made). The first also ran `bash results/2026-12-02-h200-lanes/run.sh prepare` (runs/skphotos
#        carried), which bench/plans/on-gpu.sh refused at b682a6c ("times DALI, which this Python cannot
#        import": its DALI check came before its `prepare` branch; it comes after since); the second started
#        the photo set by hand, as that branch does:
#          mkdir -p runs/photos-lanes/warm && touch runs/photos-lanes/prepare.started && (setsid bash -c
#          "python -m bench.cli prepare --photos 25000 --photos-from runs/skphotos --data-root runs/data
#          > runs/photos-lanes/prepare.txt 2>&1; echo \$? > runs/photos-lanes/prepare.rc" < /dev/null > /dev/null 2>&1 &)
#   5.   bash results/2026-12-02-h200-null-step/run.sh   DALI unpacked, the photo set awaited (nothing else
#        runs beside the plan), then bench/plans/instrument-check.json through bench/plans/on-gpu.sh
#   6.   bash results/2026-12-02-tests/gpu.sh             the GPU tests of this commit
#   7-8. bash results/2026-12-02-h200-lanes/run.sh sweep
set -u
[ -e /tmp/dali/unpacked ] || { bash .devcarry/unpack.sh && touch /tmp/dali/unpacked; }
. .devcarry/env.sh
export PYTHONUNBUFFERED=1
while [ -e runs/photos-lanes/prepare.started ] && [ ! -e runs/photos-lanes/prepare.rc ]; do sleep 2; done
tail -c 200 runs/photos-lanes/prepare.txt 2>/dev/null; echo
WAIT_S=${WAIT_S:-570} bash bench/plans/on-gpu.sh instrument-check

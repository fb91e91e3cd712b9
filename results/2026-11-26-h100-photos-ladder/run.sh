# What ran on the GPU machine (one H100, 16 cores), from the project root, DALI unpacked beside it
# (.devcarry/env.sh), in several calls on one warm machine. The first call records nvidia-smi, makes
# the photo set (2,500 JPEGs cut from scikit-image's photographs, carried as runs/skphotos) and
# starts the 224-px plan's sweep in a process session of its own (setsid), so that it runs on
# between calls, uninterrupted; every call then waits for it to end (at most WAIT_S seconds from
# the call's start) and returns what it wrote.
# PIPEBENCH_GIT_COMMIT: the machine gets a copy of the working tree without .git.
set -u
mkdir -p runs
if [ ! -e runs/photos-ladder.started ]; then
  touch runs/photos-ladder.started
  nvidia-smi > runs/nvidia-smi.txt
  python -m bench.cli prepare --photos 2500 --photos-from runs/skphotos --data-root runs/data > runs/prepare.txt 2>&1
  setsid bash -c 'python -m bench.cli sweep --config bench/plans/photos-ladder.json --out runs/photos-ladder \
    > runs/sweep.txt 2>&1; echo $? > runs/sweep.rc' < /dev/null > /dev/null 2>&1 &
fi
while [ ! -e runs/sweep.rc ] && [ "$SECONDS" -lt "${WAIT_S:-570}" ]; do sleep 5; done
cp runs/nvidia-smi.txt runs/prepare.txt runs/sweep.txt runs/photos-ladder/* "$OUT/" 2>/dev/null
tail -c 300 runs/prepare.txt; echo; tail -c 300 runs/sweep.txt; echo; cat runs/sweep.rc 2>/dev/null || echo running

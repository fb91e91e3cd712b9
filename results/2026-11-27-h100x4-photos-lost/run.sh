# The photo set's start on a 16-core GPU machine, workers spawned (as at a6a5b76) and forked (the fix),
# then the plan's own step, the 25,000-photograph set through `pipebench prepare`; from the project
# root on the GPU machine, runs/skphotos carried: bash results/2026-11-27-h100x4-photos-lost/run.sh
set -u
here=results/2026-11-27-h100x4-photos-lost
export PYTHONPATH=.
nproc
python $here/probe.py 8000 spawn
python $here/probe.py 8000 fork
/usr/bin/time -f "prepare: %e s wall, %M kB max resident" python -m bench.cli prepare --photos 25000 \
  --photos-from runs/skphotos --data-root /tmp/probe-data-$$ 2>&1 | tr '\r' '\n' | grep -v "photo set:.*[0-9]%|" 

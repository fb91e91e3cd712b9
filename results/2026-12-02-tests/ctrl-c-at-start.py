"""Ctrl-C (SIGINT to the process group, as a terminal sends it) the instant a sweep's first configuration
process starts (its progress label printed), eight times: `python results/2026-12-02-tests/ctrl-c-at-start.py`
from the project root, with a synthetic data root at /tmp/campaign2/data (`pipebench prepare --data-root
/tmp/campaign2/data`). Per try: the try, the delay after the label (s), the exit code, seconds from the
signal to the exit, the output's last line, and its lines naming an Error."""
import os, re, signal, subprocess, sys, time, threading
PY = sys.executable
T = ("sweep --device cpu --max-samples 64 --batch-size 16 --steps 2 --warmup 0 --repeats 1 --processes 1 "
     "--pipelines resident --modes loader --data-root /tmp/campaign2/data").split()
def one(i, delay):
    out = f"/tmp/ctrlc/run{i}"
    p = subprocess.Popen([PY, "-m", "bench.cli", *T, "--out", out], cwd=".", stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ, COLUMNS="200"))
    buf = bytearray()
    def reader():
        while True:
            b = p.stdout.read1(65536)
            if not b: break
            buf.extend(b)
    th = threading.Thread(target=reader, daemon=True); th.start()
    while p.poll() is None and b"2 cores #1" not in buf: time.sleep(0.005)
    time.sleep(delay)
    t = time.time()
    try: os.killpg(p.pid, signal.SIGINT)
    except ProcessLookupError: print('ended before the signal:', bytes(buf).decode(errors='replace')[-600:]); return
    rc = p.wait(); th.join(2)
    tail = bytes(buf).decode(errors="replace").strip().splitlines()[-1][:160]
    print(i, delay, rc, round(time.time() - t, 1), tail, flush=True)
    print('   ', [l for l in bytes(buf).decode(errors='replace').splitlines() if 'Error' in l][:6], flush=True)
for i, d in enumerate([0, 0, 0, 0, 0, 0, 0.05, 0]):
    one(i, d)

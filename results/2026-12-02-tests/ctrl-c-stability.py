"""Ctrl-C (SIGINT to the process group, as a terminal sends it) while `pipebench stability` starts its
first epoch's DataLoader worker (issue 69, campaign case 13): `python results/2026-12-02-tests/ctrl-c-stability.py`
from the project root, a synthetic data root at /tmp/campaign2/data (`pipebench prepare --data-root
/tmp/campaign2/data`). Each try signals a delay after the progress bar first appears (when the first epoch
begins), delays spread over the worker's start. Per try: the delay (s), the exit code, seconds from the
signal to the exit, the output's last line, and its lines naming an Error or a Traceback.

`python results/2026-12-02-tests/ctrl-c-stability.py mid` signals instead 12 s after the command starts, 15
tries (the campaign's case as written: epochs under way, batches arriving from the worker); DATA=FOLDER
names another data root."""
import os
import signal
import subprocess
import sys
import threading
import time

ARGS = ("stability --pipelines dataloader --device cpu --max-samples 512 --batch-size 16 --workers 1 --epochs 200 "
        f"--data-root {os.environ.get('DATA', '/tmp/campaign2/data')}").split()
MID = sys.argv[1:] == ["mid"]


def one(i: int, delay: float) -> None:
    p = subprocess.Popen([sys.executable, "-m", "bench.cli", *ARGS, "--out", f"/tmp/ctrlc-stab/run{i}"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                         env=dict(os.environ, COLUMNS="200"))
    buf = bytearray()

    def reader():
        while chunk := p.stdout.read1(65536):
            buf.extend(chunk)
    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    started = time.time()
    while not MID and p.poll() is None and b"stability:" not in buf:
        time.sleep(0.002)
    time.sleep(delay - (time.time() - started) if MID else delay)
    t = time.time()
    try:
        os.killpg(p.pid, signal.SIGINT)
    except ProcessLookupError:
        print(i, delay, "ended before the signal")
        return
    rc = p.wait()
    thread.join(2)
    text = bytes(buf).decode(errors="replace")
    lines = [line for line in text.replace("\r", "\n").splitlines() if line.strip()]
    print(i, delay, rc, round(time.time() - t, 1), lines[-1][:200], flush=True)
    print("   ", [line[:160] for line in lines if "Error" in line or "Traceback" in line][:6], flush=True)


for i, delay in enumerate([12.0] * 15 if MID else [0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.8, 1.2, 0, 0.05]):
    one(i, delay)

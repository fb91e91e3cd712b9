"""How long the photo set's worker processes take to start and to make `N` photographs on this machine.

    python results/2026-11-27-h100x4-photos-lost/probe.py N [fork|spawn]

The workers start as `photos.START` says, or as the second argument asks (spawn: as before the fix).
Prints the wall time of the whole set, of its first image back (the workers' start) and of the
10 % and 50 % marks, then one photograph's time in this process (the mean of 50).
"""
import sys
import tempfile
import time

from pipelines.sources import photos

if __name__ == "__main__":
    if len(sys.argv) > 2:
        photos.START = sys.argv[2]
    sources = photos.source_photos("runs/skphotos")
    n = int(sys.argv[1])
    start, back = time.perf_counter(), []
    photos.make_photos(tempfile.mkdtemp() + "/p", n, 0, photos=sources,
                       progress=lambda: back.append(time.perf_counter() - start))
    print(f"made {n} in {time.perf_counter() - start:.1f} s ({photos.START} workers, {photos.usable_cores()} cores); "
          f"first back {back[0]:.1f} s; 10 % {back[n // 10]:.1f} s; 50 % {back[n // 2]:.1f} s")
    start = time.perf_counter()
    for k in range(50):
        photos.photo_bytes(sources, 0, k)
    print(f"one photograph in this process: {(time.perf_counter() - start) / 50 * 1e3:.1f} ms")

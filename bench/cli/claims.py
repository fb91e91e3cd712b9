"""`pipebench claims`: the selected claims measured into OUT/claims.csv, then CLAIMS.md; a claims.csv
that cannot be read (empty, damaged, not a claims file: `claims.read`) is one line.
"""
from __future__ import annotations

import datetime as dt
import sys
import uuid
from pathlib import Path

from tqdm import tqdm

from pipelines.config import PipelineConfig
from pipelines.contract import resolve_device

from .. import results
from .common import _fail, record

def run_claims(args, argv: list[str]) -> Path:
    """`pipebench claims`: measure the selected claims into OUT/claims.csv, then write OUT/CLAIMS.md."""
    from .. import claims
    if args.report_only:
        if args.out is None or not (args.out / "claims.csv").is_file():
            raise SystemExit("pipebench claims --report-only: needs --out DIR holding claims.csv")
    else:
        try:
            device = resolve_device(args.device)
            config = PipelineConfig(data_root=args.data_root, source=args.source, data_seed=args.data_seed,
                                    cache_root=args.cache_root, seed=args.seed, device=str(device),
                                    **({} if args.workers is None else {"num_workers": args.workers}))
        except (ValueError, RuntimeError) as e:   # a bad or unavailable --device, bad options
            raise _fail("claims", e) from None
        now = dt.datetime.now(dt.timezone.utc)
        args.out = args.out or Path("runs") / f"claims-{now:%Y%m%d-%H%M%S}-{device.type}"
        args.out.mkdir(parents=True, exist_ok=True)
        env = results.environment()
        record(args.out, ["pipebench", *argv], env)
        run_id = f"claims-{now:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"   # unique: CLAIMS.md takes the latest
        writer = results.CsvWriter(args.out / "claims.csv", env, run_id=run_id, columns=claims.COLUMNS,
                                   guarded=True)   # no cell a spreadsheet reads as a formula
        context = claims.Context(device, config, claims.Scale.tiny() if args.quick else claims.Scale())
        print(f"device: {device}; output: {args.out}/claims.csv", file=sys.stderr)
        with tqdm(total=len(args.claims), unit="claim", desc="claims") as bar:
            claims.run(args.claims, context, writer.write, bar)
    try:
        df = claims.read(args.out / "claims.csv")
    except ValueError as e:   # claims.csv empty, damaged or not a claims file
        raise _fail("claims", e) from None
    path = claims.write_report(args.out / "claims.csv", args.out, df)
    found = claims.verdicts(df)
    if args.report_only:
        record(args.out, ["pipebench", *argv])
    print("\n".join(f"{i:>2} {key:22s} {v.verdict}" for i, (key, v) in enumerate(found.items(), 1)))
    print(path)
    return path

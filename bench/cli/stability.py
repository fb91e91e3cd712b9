"""`pipebench stability`: many epochs per pipeline, host and GPU memory per epoch, into
OUT/stability.csv (the report: `bench.studies.stability.write_report`). Refused in one line before
anything is written: no pipeline asked for can run here (fewer --epochs than growth needs: by the
parser, `stability.MIN_EPOCHS`); before any epoch is measured: a batch larger than the data.
"""
from __future__ import annotations

import gc
import signal
import sys

from tqdm import tqdm

import pipelines
from pipelines.config import PipelineConfig
from pipelines.contract import resolve_device

from .. import results
from ..measuring import interrupts
from ..running import conduct
from .common import _fail, record

def run_stability(args, argv: list[str]) -> int:
    """`pipebench stability`: OUT/stability.csv, OUT/stability.png and OUT/STABILITY.md."""
    from ..studies import stability
    import pandas as pd
    try:
        device = resolve_device(args.device)
        config = PipelineConfig(data_root=args.data_root, source=args.source, data_seed=args.data_seed,
                                cache_root=args.cache_root, device=str(device), max_samples=args.max_samples,
                                batch_size=args.batch_size or (512 if device.type == "cuda" else 64),
                                dtype="bfloat16" if device.type == "cuda" else "float32",
                                channels_last=device.type == "cuda",
                                **({} if args.workers is None else {"num_workers": args.workers}))
        reasons = {n: reason or pipelines.source_refusal(n, pipelines.resolve_config(n, config))
                   for n, reason in pipelines.available(args.pipelines).items()}
        names = [n for n in args.pipelines if not reasons.get(n)]
        if not names:
            raise ValueError("nothing asked for can run here: "
                             + "; ".join(conduct.named_refusal(n, reasons[n]) for n in args.pipelines))
    except (ValueError, RuntimeError) as e:
        raise _fail("stability", e) from None
    args.out.mkdir(parents=True, exist_ok=True)
    env = results.environment()
    record(args.out, ["pipebench", *argv], env)
    rows, stop, name = [], None, ""
    try:
        with tqdm(total=len(names) * args.epochs, unit="epoch", desc="stability") as bar, \
                interrupts.signals_as_interrupts():
            for name in names:
                bar.set_description(name)
                for row in stability.measure(name, pipelines.resolve_config(name, config), args.epochs):
                    rows.append(row)
                    bar.update(1)
    except (OSError, ValueError) as e:   # a missing data root, a folder that cannot be written, a batch past the data
        raise _fail("stability", e) from None
    except (interrupts.Interrupted, KeyboardInterrupt) as e:   # the epochs measured are written below
        stop = interrupts.Interrupted(e.exit_code - 128 if isinstance(e, interrupts.Interrupted) else signal.SIGINT)
    if stop is not None:   # the interrupted epoch's iterator (its traceback held it) shut down now, not after
        gc.collect()       # the exit's clean-up ended the resource tracker (11 KeyError tracebacks from it)
        rest = names[names.index(name) + 1:] if name else names
        ended = (f"stopped by {stop} after {sum(row['pipeline'] == name for row in rows)} of {args.epochs} epochs "
                 f"of `{name}`" + (f" (not run: {', '.join(rest)})" if rest else ""))
        if not rows:
            print(f"pipebench stability: {ended}; no epoch measured, no row written", file=sys.stderr)
            return stop.exit_code
    df = pd.DataFrame(rows).assign(**{k: env[k] for k in ("gpu", "torch", "cpu_count", "hostname", "git_commit")})
    df.to_csv(args.out / "stability.csv", index=False)
    title = f"{env['gpu'] or 'CPU'}, batch {config.batch_size}, {config.num_workers} workers, {args.epochs} epochs"
    skipped = {n: reasons[n] for n in args.pipelines if reasons.get(n)}
    print(stability.write_report(df, args.out, title, ended if stop else None, skipped))
    if stop is not None:
        print(f"pipebench stability: {ended}; the epochs measured are in {args.out}", file=sys.stderr)
        return stop.exit_code
    return 0

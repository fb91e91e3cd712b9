"""`pipebench COMMAND`: parse, then hand over to the command's module; the small commands (report,
prepare, download, list, env) are here, one function each. Every process a command started has ended
before pipebench exits (`reaping.reap_children`, at interpreter exit). Help, --version and usage errors
are answered by the parsers without torch (`light.light_parser`), before torch and the pipelines are
imported. A Ctrl-C while they import, the options are read, or compare or sweep plan (until the run
holds SIGINT itself) is one line and exit code 130, at once (`starting.starting`); one in another
command's work that it does not catch is one line too (`_stopped`).
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import time
import warnings
from pathlib import Path

from .top import COMMANDS, LINE_LIMIT, clip


def main(argv: list[str] | None = None) -> int:
    """`pipebench ARGV` (sys.argv[1:] by default): its exit code. An error is one line, cut after
    LINE_LIMIT characters wherever it comes from (a megabyte value echoed in it is not printed back)."""
    from .starting import starting
    if argv is None:   # the program itself (a caller of main(ARGV) keeps its own display of warnings)
        said_in_one_line(_name(sys.argv[1:]))
    argv = sys.argv[1:] if argv is None else argv
    started, parsed, start = time.monotonic(), False, None
    try:
        with starting(_name(argv), started) as start:
            first = _first_parser()
            if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
                first.error(f"unrecognized arguments: {argv[0]}")   # not "COMMAND is required" (`--versio`)
            first.parse_args(argv)   # prints the help, the version or a usage error, and exits
            args, grids = _parse(argv)   # imports torch and the pipelines
            if args.command in ("compare", "sweep"):   # which plan first: the run then holds SIGINT itself
                from .measure import run_grid
                return run_grid(grids, argv, begun=start.release)
        parsed = True
        return _command(argv, args)
    except SystemExit as e:
        if isinstance(e.code, str) and len(e.code) > LINE_LIMIT:
            raise SystemExit(clip(e.code, LINE_LIMIT)) from None
        raise
    except KeyboardInterrupt:   # where `starting` leaves SIGINT as it is, or in a command's work
        return _stopped(argv, started, parsed or (start is not None and start.released))


def said_in_one_line(command: str) -> None:
    """pipebench's own warnings (a torn last line of a results file, left out or set aside) said in one
    line on stderr, named by the command ("pipebench report: …"), not in Python's form with the
    warning's class and source line; other packages' warnings as Python shows them."""
    python_s = warnings.showwarning
    ours = tuple(str(Path(__file__).resolve().parents[2] / package) for package in ("bench", "pipelines"))

    def show(message, category, filename, lineno, file=None, line=None):
        if str(filename).startswith(ours):
            print(f"{command}: {message}", file=file or sys.stderr)
        else:
            python_s(message, category, filename, lineno, file, line)
    warnings.showwarning = show


def _first_parser():
    """The parser that answers help and usage errors: the parsers without torch (`light.light_parser`),
    but where the real ones' module or the pipelines are imported already (by a program or a test that
    uses pipebench's modules, and may have registered a pipeline of its own) the real ones, which then
    see declarations added at run time and cost no import of torch."""
    if f"{__package__}.parser" in sys.modules or "pipelines" in sys.modules:
        from .parser import build_parser
        return build_parser()
    from .light import light_parser
    return light_parser()


def _name(argv: list[str]) -> str:
    """"pipebench COMMAND", as messages name it ("pipebench" before a command is named)."""
    return f"pipebench {argv[0]}" if argv and argv[0] in COMMANDS else "pipebench"


def _stopped(argv: list[str], started: float, parsed: bool) -> int:
    """A Ctrl-C no command caught, said in one line, exit code 130 (with --debug the traceback first):
    one before a command's work (`parsed`: begun) wrote nothing (`starting.stop_line`), one in it is
    said as such."""
    from .starting import stop_line
    if os.environ.get("PIPEBENCH_DEBUG"):
        import traceback
        traceback.print_exc()
    if parsed:
        print(f"{_name(argv)}: stopped by SIGINT after {time.monotonic() - started:.0f} s", file=sys.stderr)
    else:
        print(stop_line(_name(argv), started), file=sys.stderr)
    return 130


def _parse(argv: list[str]) -> tuple:
    """`argv` read by the real parser (`parser.build_parser`: torch and the pipelines imported), and
    its grids (one per --config grid, else the command line's); `main`. The commands' modules are
    imported here too, while a Ctrl-C stops at once (`starting`)."""
    from ..running import reaping
    from . import claims, measure, stability   # noqa: F401 (run by `main` and `_command`)
    from .parser import build_parser, config_grids
    atexit.unregister(reaping.reap_children)   # registered once, after multiprocessing's own: it runs first
    atexit.register(reaping.reap_children)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.debug:   # the configuration processes inherit it
        os.environ["PIPEBENCH_DEBUG"] = "1"
    grids = [args]
    if getattr(args, "config", None) is not None:   # the file's options first: typed ones win
        grids = [parser.parse_args([argv[0], *tokens, *argv[1:]]) for tokens in config_grids(args.config, parser)]
    return args, grids


def _command(argv: list[str], args) -> int:
    """Run the command `argv` names but compare and sweep (`main`), its options parsed (`_parse`)."""
    from .claims import run_claims
    from .stability import run_stability
    if args.command == "claims":
        run_claims(args, argv)
        return 0
    if args.command == "stability":
        return run_stability(args, argv)
    return {"report": _report, "prepare": _prepare, "download": _download, "list": _list, "env": _env}[args.command](
        args, argv)


def _report(args, argv: list[str]) -> int:
    """`pipebench report`: REPORT.md, SUMMARY.md, ANSWER.md (or PREDICTION.md alone) and the README's
    blocks from the rows; a file it cannot read or write is one line naming it."""
    from .common import _fail, record
    csvs = [p / "results.csv" if p.is_dir() else p for p in args.csv]
    missing = [str(p) for p in csvs if not p.is_file()]
    if missing:
        raise SystemExit(f"pipebench report: no such file: {', '.join(missing)} (give run folders holding "
                         "results.csv, or results CSV files)")
    if args.out is None:   # one run folder: its report goes beside its rows
        if len(args.csv) != 1 or not args.csv[0].is_dir():
            raise SystemExit("pipebench report: --out is needed where the rows are not one run folder's "
                             "(the report of several runs, or of a CSV file, goes to a folder of its own)")
        args.out = args.csv[0]
    if args.out.exists() and not args.out.is_dir():
        raise SystemExit(f"pipebench report: --out {args.out} is a file: name a folder")
    try:
        from .. import report
        if args.prediction_only and args.readme:
            raise SystemExit("pipebench report: --prediction-only writes PREDICTION.md alone: no --readme with it")
        path = (report.write_prediction(csvs, args.out) if args.prediction_only else
                report.write(csvs, args.out, args.readme))
        record(args.out, ["pipebench", *argv], once=True)
    except ValueError as e:   # an empty CSV, one that is not pipebench's
        raise _fail("report", e) from None
    except OSError as e:   # a folder that cannot be written, a file that cannot be read, a full disk
        raise _fail("report", e, _report_os_error(e, args, csvs)) from None
    except KeyboardInterrupt:
        print("pipebench report: stopped by SIGINT; every file it had not finished is as it was before",
              file=sys.stderr)
        return 130
    print(path)
    return 0


def _report_os_error(e: OSError, args, csvs: list[Path]) -> str:
    """The line for a file `report` could not read or write: which, and what was left as it was."""
    name = Path(e.filename or args.out)
    new = name.name.startswith(".") and name.name.endswith(".new")   # results.replace_file's new file
    name = name.with_name(name.name[1:-4]) if new else name
    readmes = [args.readme] if args.readme else []
    read = not new and str(name) in {str(p) for p in [*csvs, *readmes]}
    readme = name in readmes or new and name in {Path(os.path.realpath(p)) for p in readmes}   # a link's target
    hints = [] if read else [f"{name} is left as it was"] * name.is_file() + [
        "choose a writable --out folder"] * (not readme)
    hint = f": {'; '.join(hints)}" if hints else ""
    return f"cannot {'read' if read else 'write'} {name} ({e.strerror or e}){hint}"


def _prepare(args, argv: list[str]) -> int:
    """`pipebench prepare`: the source validated and its JPEG copy made (your photographs,
    `imagefolder:PATH`: each checked, nothing made); with --photos, a photo set."""
    from pipelines import sources
    from pipelines.config import PipelineConfig
    from pipelines.sources import photos
    final = Path(args.data_root) / f"photos-seed{args.data_seed}"
    if args.photos_from is not None and not args.photos:
        raise SystemExit("pipebench prepare: --photos-from names what a photo set is cut from: give --photos N too")
    try:   # bad data, a folder that cannot be written: one line, no traceback
        found = None
        if args.photos:   # a photo set that cannot be made: refused before anything is written
            found = photos.source_photos(args.photos_from)
            photos.check_room(final, args.photos, args.data_seed, found)
        config = PipelineConfig(data_root=args.data_root, source=args.source, data_seed=args.data_seed,
                                cache_root=args.cache_root)
        if config.photos:   # your files, read as they are: each checked as compare checks them, nothing made
            said = _check_photographs(Path(config.photo_folder))
        else:
            source, folder = sources.resolve_folder(config)
            for split in ("train", "test"):
                sources.load_split(folder, split, config.cache_root)   # validates every file and its checksum
            jpeg = sources.prepare_jpeg(folder, args.jpeg_quality, cache_root=config.cache_root)
            sizes = sources.load_jpeg(folder, "train", args.jpeg_quality, cache_root=config.cache_root)
            said = (f"{source}: {folder} (validated; checksums match {sources.checksum_origin(folder)})\n"
                    f"JPEG q{args.jpeg_quality}: {jpeg} (checksums match JPEG.json; "
                    f"mean {len(sizes.data) / len(sizes):.0f} B per train image)")
    except (OSError, ValueError) as e:
        raise SystemExit(f"pipebench prepare: {e}") from None
    print(said)
    if args.photos:
        _make_photos(args, final, found)
    return 0


def _check_photographs(root: Path) -> str:
    """`prepare --source imagefolder:ROOT`: every photograph of its train split, and of its test split
    where it has one (train/ beside val/ or test/), checked (`imagefolder.check_imagefolder`: the first
    that cannot be used, or a missing folder, is a one-line ValueError); the line that says so."""
    from pipelines.sources import imagefolder
    by_split = (root / "train").is_dir() and any((root / name).is_dir() for name in imagefolder.VAL_FOLDERS)
    splits = ["train", "test"] if by_split else ["train"]
    for split in splits:
        imagefolder.check_imagefolder(root, split)
    return (f"imagefolder: {imagefolder.shown(root)} (every photograph of its {' and '.join(splits)} "
            f"split{'s' * (len(splits) - 1)} checked; read as they are: no JPEG copy to make)")


def _make_photos(args, final: Path, found) -> None:
    """`prepare --photos N`: the photo set made in `final` from `found`, with a progress bar."""
    from tqdm import tqdm

    from pipelines.sources import photos
    try:
        with tqdm(total=args.photos, unit="photo", desc="photo set") as bar:
            meta = photos.make_photos(final, args.photos, args.data_seed, progress=lambda: bar.update(), photos=found)
    except (OSError, ValueError) as e:
        raise SystemExit(f"pipebench prepare: {e}") from None
    from ..report.formatting import plural
    print(f"photos: {final} ({meta['count']} JPEGs in {plural(len(meta['sources']), 'class', 'classes')}; mean "
          f"{meta['bytes_mean']:.0f} B, median side {meta['side_median']:g} px; sources and licences "
          f"in {photos.META})")


def _download(args, argv: list[str]) -> int:
    from pipelines import sources
    try:   # no network, a folder that cannot be written: one line, no traceback
        print(sources.download_cifar10(args.data_root))
    except OSError as e:
        raise SystemExit(f"pipebench download: {e}") from None
    return 0


def _list(args, argv: list[str]) -> int:
    import pipelines
    for name, reason in pipelines.available().items():
        print(f"{name:12s} {'ok' if reason is None else 'unavailable: ' + reason}")
    return 0


def _env(args, argv: list[str]) -> int:
    from .. import results
    print(json.dumps(results.environment(), indent=2))
    return 0

"""The report's files: REPORT.md, SUMMARY.md and ANSWER.md, each written whole, and a README's
blocks of the report (`write`), and PREDICTION.md, from a run's one-GPU rows alone (`write_prediction`).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import results
from .analysis import RULES, RunView, load, runs, view_of
from .answers import answers
from .formatting import code, epoch_text, per_gpu, shown
from .gathered import gathered
from .hosts import answer as hosts_answer, prediction_file
from .scaling import most_gpus, one_gpu_rows
from .readme import readme_blocks, update_readme
from .sections import TIMERS, run_sections
from .summary import gpus_sentence, summary

NO_GPU = ("These rows ran without a GPU: the device the timers synchronize is the CPU, every loader row "
          "ran alone (level 0, no busy step), and a core count is the machine's, not a GPU's.")


def write_answers(out: Path, found: list[tuple[str, pd.DataFrame, list[str]]], whole: str) -> None:
    """OUT/ANSWER.md (`answer_file`; a path's bytes that are not UTF-8 written escaped: `shown`)."""
    results.replace_file(out / "ANSWER.md", shown(answer_file(found, whole)))


def answer_file(found: list[tuple[str, pd.DataFrame, list[str]]], whole: str) -> str:
    """ANSWER.md: each run's (name, rows, answers) answers (`answers`), one line per situation, under
    its name and epoch length (`epoch_text`); `whole` says where the whole report is (Markdown)."""
    lines = ["# Which pipeline keeps the model fed", ""]
    for name, group, said in found:
        lines += [f"From {code(name)} ({whole} for the whole report{_epochs(group)}).", "", *[f"- {a}" for a in said], ""]
    return "\n".join(lines)


def write_prediction(paths: list[str | Path], out: Path) -> Path:
    """out/PREDICTION.md (`hosts.prediction_file`) from one run's one-GPU rows: every row of several
    GPUs is dropped as the rows are loaded, before anything reads them. Returns its path."""
    found = runs(one_gpu_rows(load(paths)))
    if len(found) != 1:
        raise ValueError(f"--prediction-only takes one run's one-GPU rows; these rows hold {len(found)}"
                         + (": " + "; ".join(name for name, _ in found) if found else ""))
    text = prediction_file(*found[0])
    out.mkdir(parents=True, exist_ok=True)
    results.replace_file(out / "PREDICTION.md", text)
    return out / "PREDICTION.md"


def write(paths: list[str | Path], out: Path, readme: Path | None = None) -> Path:
    """Write out/REPORT.md (the table gathered from several runs, `gathered`, then the summary of each
    run) and its plots, out/SUMMARY.md and out/ANSWER.md (each run's answers); with `readme`, every
    block of this report the README holds (`readme.readme_blocks`: of one run its summary, answer,
    several-GPU answer; of several the gathered table). Returns the report's path."""
    df = load(paths)
    found = runs(df)
    kinds = readme_blocks(readme, out) if readme is not None else []   # refused before anything is written
    views = [view_of(group) for _, group in found]
    together = gathered([(name, group, view) for (name, group), view in zip(found, views)]) if len(found) > 1 else []
    if set(kinds) - {"table"} and len(found) != 1:
        raise ValueError(f"--readme: a summary, answer or several-GPU block takes one run; these rows hold "
                         f"{len(found)}: " + "; ".join(name for name, _ in found))
    if "table" in kinds and not together:
        raise ValueError("--readme: a table block gathers the e2e cells of two or more runs; these rows hold "
                         f"{len(found)} run{'s' if len(found) != 1 else ''} with e2e cells")
    out.mkdir(parents=True, exist_ok=True)
    sections, briefs, said = [], [], []
    for i, ((name, group), view) in enumerate(zip(found, views), start=1):
        plots: dict[str, str] = {}
        sections += run_sections(name, group, view, out, f"run{i}", plots)
        briefs.append((name, summary(name, group, view, "REPORT.md", plots)))
        said.append((name, group, answers(view.cells, view.situations)))
    answered = [entry for entry in said if entry[2]]
    cpu = [NO_GPU, ""] if not per_gpu(df.device) else []   # the timers' words are a GPU's: said once for a CPU run
    head = ["## All runs in one table", "", *together, ""] if together else []
    parts = ["# Report", "", "Sources: " + ", ".join(code(shown(Path(p).as_posix())) for p in dict.fromkeys(paths)),
             "", *head, *[line for _, brief in briefs for line in ["## Summary", "", *brief, ""]], TIMERS, "", *cpu,
             RULES, "", *sections]
    texts = {"SUMMARY.md": "\n".join(["# Summary", "", *head, *[line for _, brief in briefs for line in [*brief, ""]]]),
             "ANSWER.md": answer_file(answered, "[REPORT.md](REPORT.md)") if answered else None,
             "REPORT.md": "\n".join(parts)}   # every text made before a file is written
    for file, text in texts.items():
        if text is None:   # no situation measured: no answer, not an older one left beside this report
            (out / file).unlink(missing_ok=True)
        else:
            results.replace_file(out / file, shown(text))   # a name's bytes that are not UTF-8 written escaped
    blocks = {"summary": lambda: briefs[0][1], "answer": lambda: answer_block(*said[0]),
              "hosts": lambda: hosts_block(*found[0], views[0]), "table": lambda: together}
    for kind in kinds:
        update_readme(readme, blocks[kind](), out, kind)
    return out / "REPORT.md"


def answer_block(name: str, group: pd.DataFrame, answer: list[str]) -> list[str]:
    """The README's answer block: the run's answers, one line per situation."""
    if not answer:
        return [f"From {code(name)}: no answer, no e2e configuration ran beside its model-only one ([report](REPORT.md))."]
    return [f"From {code(name)} ([full report](REPORT.md){_epochs(group)}):", "", *[f"- {a}" for a in answer]]


def hosts_block(name: str, group: pd.DataFrame, view: RunView) -> list[str]:
    """The README's several-GPU block: what the run measured at each GPU count and predicts for more
    (`view`: the run's `view_of`, made once for the report)."""
    said = hosts_answer(group, gpus_sentence(group, view.cells, "The bus, every GPU copying at once"))
    gpus = most_gpus(group)
    if said:
        return [f"From {code(name)} ([full report](REPORT.md)), {_host(group, gpus)}:", "", *said]
    return [f"From {code(name)}: no several-GPU answer: " + ("it ran on one GPU only" if gpus == 1 else
            "no model-only and e2e rows, copies or loader-only rows at several GPU counts to compare")
            + " ([report](REPORT.md))."]


def _epochs(group: pd.DataFrame) -> str:
    """"; an epoch: ..." (`epoch_text`) for an answer's header, "" for a run without pipeline rows."""
    epochs = epoch_text(group)
    return f"; {epochs}" if epochs else ""


def _host(group: pd.DataFrame, gpus: int) -> str:
    """"2 × NVIDIA H100 80GB HBM3 of one host of 32 cores": the most GPUs a run used, and its host."""
    ok = group[group.status == "ok"]
    cores = f" of {int(ok.cpu_count.max())} cores" if ok.cpu_count.notna().any() else ""
    return f"{gpus} × {', '.join(sorted(set(ok.gpu.dropna()))) or 'CPU'} of one host{cores}"

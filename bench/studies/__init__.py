"""Studies: measurements beside the sweep, each a command of its own, that explain or check it.

`timeline` (`python -m bench.studies.timeline`: where the GPU's time goes, from a profiler trace;
`timeline_plot` draws it), `standin` (`python -m bench.studies.standin`: how well the busy step
stands in for a real training step) and `stability` (`pipebench stability`: memory over many
epochs). They use `measuring/` and `results/` as the sweep does; the sweep uses none of them.
"""

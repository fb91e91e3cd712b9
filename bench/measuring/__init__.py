"""Measuring: one configuration timed inside one process, the same way for every pipeline.

Split by concern so each can be read alone: `spec` (what a measurement is: `RunSpec`, `Window`, the
modes), `harness` (the windows and what each timer includes), `drain` (the queues emptied before a
window), `busy` (the synthetic step of loader mode), `training` (the step the harness trains:
eager, captured or compiled, under DDP or DataParallel), `models` (built-in and users' models),
`workloads` (what a window iterates besides a plain pipeline), `machine` (the CPU budget, CPU time
and GPU state around a window), `distributed` (one process per GPU under torchrun) and `interrupts`
(Ctrl-C as an exception, held back while an iterator starts). Nothing here imports from the other
folders of bench/.
"""

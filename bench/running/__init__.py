"""Running: which configurations a run measures, in which order, and the processes they run in.

`options` are the options a run takes (compare's and sweep's; the timeline study's too), `plan`
turns them into RunSpecs and orders them in rounds (and says which share a process),
`conduct` is the loop that takes a run's configuration processes one after another, `runner`
measures a list of them into one results folder, surviving what goes wrong (a process per
configuration, a deadline, resume), `children` is what runs inside those child processes, and
`reaping` ends them all as pipebench exits. They
are apart from `measuring/` because a configuration is measured the same way whether one process
runs it or a sweep of thousands does.
"""

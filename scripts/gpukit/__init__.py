"""The GPU verification kit behind scripts/gpu-verify and scripts/gpu-wheelhouse.

A lent GPU comes in short leases (about 30 minutes, 10 minutes a command, 8 files back), with no
network. The kit makes one command per stage that fits those limits; docs/gpu-verification.md
says how to run it.

wheelhouse.py  what gpuplay needs that the GPU box lacks: the closure, its download, its check
outdir.py      the output folder: a fixed plan of at most 8 files, reports written as they grow
proc.py        subprocesses with a deadline (SIGTERM, then SIGKILL) and the box's environment
stages.py      env, tests, bench, app, talk: what each runs and checks
probes.py      the Python run in a child process for each GPU probe (a hang or crash stays there)
app_drive.py   the real app driven by Textual's Pilot at 120×36, with SVG screenshots
rehearse.py    the rehearsal's audit: every stage on the CPU, code errors apart from absences
"""

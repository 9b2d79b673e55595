"""gpuplay's engine: backends, workloads, timing, statistics, telemetry and reports.

Nothing here imports Textual, and torch/CuPy are imported only when a run or a
probe needs them, so the headless CLI starts fast and the tests can check it.
"""

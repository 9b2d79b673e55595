"""One table of levers: every knob that changes a measurement, declared once.

A lever is a RunSpec field (backend, amp, cuda_graphs, …) or a parameter of the workloads that
declare it (attention's SDPA backend, sparse's density, …). From this table are generated:
the CLI options (cli/options.py), the live controls and their key bindings (tui/controls.py,
tui/lever_keys.py), the deck field types (core/reports/decks.py), the CSV columns (core/reports/report.py), the
compare and sweep variants, and the conditions a result carries (core/runner/plan.py).

What stays outside the table, on purpose: the backend code that implements a lever, and the
planner's refusal rules (core/catalogue/planner.py `assess`), which judge combinations of levers against
the machine; `refused_by` below points at them. The model is harlequin's option table (one
declaration → CLI flag, config key and widget), kept as plain data: core imports no click.

Adding a lever: one row here, its field in RunSpec (a workload parameter needs none), its
backend code, its refusals in the planner, a test (docs/architecture.md, "Levers").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuplay.core.spec import (
    ALLOC_MODES,
    AMP_MODES,
    BACKENDS,
    CACHE_MODES,
    COMPILE_MODES,
    DTYPES,
    LINALG_LIBRARIES,
    RunSpec,
)
from gpuplay.core.storage import bounds


def cpu_threads() -> tuple[int, int]:
    """Threads a measurement may ask for: 1 to this machine's logical cores."""
    return (1, bounds.max_threads())


@dataclass(frozen=True)
class Lever:
    name: str  # the RunSpec field, or the workload parameter's name
    kind: type  # str, bool, int or float
    default: Any
    help: str
    title: str = ""  # the words on screen ("" → the name)
    choices: tuple[Any, ...] = ()  # the values a str lever takes (bools: False, True)
    limits: tuple[float, float] | Callable[[], tuple[int, int]] | None = None  # core.bounds
    optional: bool = False  # None is a value: "not set, the libraries' own" (repeat, threads)
    flag: str = ""  # CLI long flag without dashes ("" → the name with dashes)
    short: str = ""  # CLI short flag ("-b")
    key: str = ""  # live key that cycles it ("" → no live control)
    shown: bool = True  # the key shown in the footer (else in help and the palette only)
    csv: str = ""  # CSV column ("" → the name)
    csv_condition: bool = False  # the CSV cell is the result's condition under `csv` (what ran)
    variants: tuple[tuple[str, Any], ...] = ()  # compare/sweep variant name → value on top of torch
    backends: tuple[str, ...] = ()  # the backends it means something on (() → all)
    cuda_only: bool = False  # it means something on CUDA devices only
    workloads: tuple[str, ...] = ()  # a parameter of these workloads, not a RunSpec field
    live_for: tuple[str, ...] = ()  # its live control shows for these workloads only (() → all)
    live_values: tuple[Any, ...] = ()  # what the key cycles through, for a number lever
    condition: bool = False  # written into a result's conditions under its name
    shared: bool = False  # the NumPy baseline runs with the candidate's value (a timing condition)
    refused_by: str = ""  # where the planner refuses its combinations (for the reader)
    adjust: Callable[[RunSpec], dict[str, Any]] | None = None  # after it changes, what else must

    @property
    def label(self) -> str:
        return self.title or self.name

    @property
    def is_param(self) -> bool:
        return bool(self.workloads)

    @property
    def cli_flag(self) -> str:
        return "--" + (self.flag or self.name.replace("_", "-"))

    @property
    def csv_column(self) -> str:
        return self.csv or self.name

    @property
    def live(self) -> bool:
        return bool(self.key)

    def applies_to(self, spec: RunSpec) -> bool:
        """A workload parameter exists only for its workloads; a spec field for every spec."""
        return not self.workloads or spec.workload in self.workloads

    def live_in(self, spec: RunSpec) -> bool:
        """Whether the live controls offer it for this spec's workload."""
        return self.applies_to(spec) and (not self.live_for or spec.workload in self.live_for)

    def value(self, spec: RunSpec) -> Any:
        """Its value in `spec`; a workload parameter the spec does not set is None here (the
        workload's default applies: tui/controls.py reads it from the workload's Param)."""
        if self.is_param:
            return spec.params.get(self.name, self.default)
        return getattr(spec, self.name)

    def values(self) -> tuple[Any, ...]:
        """The values a live key cycles through (the device lever's come from the probes, a workload
        parameter's choices from its Param)."""
        if self.kind is bool:
            return (False, True)
        return self.choices or self.live_values

    def set(self, spec: RunSpec, value: Any) -> RunSpec:
        if self.is_param:
            return spec.replace(params={**spec.params, self.name: value})
        return spec.replace(**{self.name: value})

    def deck_types(self) -> tuple[type, ...]:
        """The TOML types a deck step may give it (an integer is a fine float)."""
        return (int, float) if self.kind is float else (self.kind,)


def _not_torch(spec: RunSpec) -> dict[str, Any]:
    """What a non-torch backend cannot keep: every torch-only lever back to its default."""
    return {
        lv.name: lv.default
        for lv in spec_levers()
        if lv.backends == ("torch",) and lv.value(spec) != lv.default
    }


def _after_backend(spec: RunSpec) -> dict[str, Any]:
    kw = _not_torch(spec) if spec.backend != "torch" else {}
    if spec.backend == "numpy":
        kw["device"] = "cpu"
    if spec.backend == "cupy" and spec.device == "cpu":
        from gpuplay.core.backends import get_backend

        kw["device"] = (get_backend("cupy").device_ids(timeout=0) or ["cuda:0"])[0]
    if spec.backend in ("numpy", "cupy") and spec.dtype == "bfloat16":
        kw["dtype"] = "float32"
    if spec.params.get("method") == "autograd" and spec.backend != "torch":
        kw["params"] = {**spec.params, "method": "auto"}
    if spec.params.get("runtime", "eager") != "eager" and spec.backend != "torch":
        kw["params"] = {**kw.get("params", spec.params), "runtime": "eager"}  # runtimes take a torch model
    return kw


def _after_device(spec: RunSpec) -> dict[str, Any]:
    if spec.device != "cpu":
        return {}
    kw = {lv.name: lv.default for lv in spec_levers() if lv.cuda_only and lv.value(spec) != lv.default}
    if spec.backend == "cupy":
        kw["backend"] = "numpy"
    return kw


def _after_dtype(spec: RunSpec) -> dict[str, Any]:
    return {"amp": "off"} if spec.dtype != "float32" and spec.amp != "off" else {}


def _after_amp(spec: RunSpec) -> dict[str, Any]:
    return {"dtype": "float32"} if spec.amp != "off" else {}


def _after_compile(spec: RunSpec) -> dict[str, Any]:
    # reduce-overhead captures CUDA graphs itself: two graph captures of one step cannot nest
    return {"cuda_graphs": False} if spec.compile == "reduce-overhead" and spec.cuda_graphs else {}


def _after_graphs(spec: RunSpec) -> dict[str, Any]:
    return {"compile": "default"} if spec.cuda_graphs and spec.compile == "reduce-overhead" else {}


def _after_runtime(spec: RunSpec) -> dict[str, Any]:
    # a runtime other than eager takes the torch.nn model: on NumPy or CuPy there is none
    if spec.params.get("runtime", "eager") == "eager" or spec.backend == "torch":
        return {}
    return {"backend": "torch", **({"device": "cpu"} if spec.device == "mps" else {})}


LEVERS: tuple[Lever, ...] = (
    # -- where and in what precision -------------------------------------------------------
    Lever("backend", str, "numpy", "Array library.", choices=BACKENDS, short="-b", key="b",
          adjust=_after_backend, refused_by="planner.device_refusal"),
    Lever("device", str, "cpu", "cpu, cuda, cuda:N (NVIDIA, or AMD on ROCm), xpu:N (Intel) or mps.", short="-d", key="d",
          adjust=_after_device, refused_by="planner.device_refusal"),
    Lever("dtype", str, "float32", "Element type of the inputs.", choices=DTYPES, key="t",
          adjust=_after_dtype, refused_by="planner.assess (bfloat16, workload.unsupported)"),
    Lever("amp", str, "off", "torch.autocast precision.", title="AMP", choices=AMP_MODES, key="a",
          backends=("torch",), variants=(("amp-bf16", "bf16"), ("amp-fp16", "fp16")), condition=True,
          adjust=_after_amp, refused_by="planner.assess (AMP)"),
    Lever("compile", str, "off", "torch.compile mode (compile time is reported apart).",
          choices=COMPILE_MODES, key="c", backends=("torch",), variants=(("compile", "default"),),
          condition=True, adjust=_after_compile, refused_by="planner.assess (compile)"),
    Lever("tf32", bool, False, "Allow TF32 tensor-core matmuls (torch, CUDA).", title="TF32", key="f",
          shown=False, backends=("torch",), cuda_only=True, variants=(("tf32", True),), condition=True,
          refused_by="planner.assess (TF32)"),
    Lever("cuda_graphs", bool, False, "Replay each step as a CUDA graph (torch, CUDA).",
          title="CUDA graphs", flag="graphs", key="g", shown=False, backends=("torch",), cuda_only=True,
          variants=(("graphs", True),), condition=True, adjust=_after_graphs,
          refused_by="planner.assess (CUDA graphs)"),
    Lever("linalg_library", str, "default", "Preferred torch CUDA linear-algebra library.",
          title="linalg library", choices=LINALG_LIBRARIES, flag="linalg", key="i", shown=False,
          backends=("torch",), cuda_only=True, live_for=("svd", "eigh", "solve", "lstsq"), refused_by="planner.assess (linalg library)"),
    # -- what the timing includes ----------------------------------------------------------
    Lever("transfers", bool, False,
          "Time host→device input copies and the result's copy back inside each step.",
          csv="transfers_timed", csv_condition=True, refused_by="planner.assess (transfers)"),
    Lever("cache", str, "warm",
          "cold: flush the L2 (GPU) or last-level cache (CPU) between steps, outside the timing.",
          choices=CACHE_MODES),
    Lever("alloc", str, "auto",
          "Host allocation mode: auto times the mode a plain loop in a fresh process gets (and shows "
          "the other beside it); warm reuses freed pages between steps; cold returns them to the OS "
          "each step.", choices=ALLOC_MODES, shared=True),
    # -- how long and how often ------------------------------------------------------------
    Lever("warmup", int, 3, "Untimed steps before the timed ones.", limits=bounds.WARMUP, shared=True),
    Lever("repeat", int, None, "Timed steps (default: as many as fit in --budget, at least 5).",
          limits=bounds.REPEAT, optional=True, shared=True),
    Lever("budget_s", float, 1.0, "Seconds of timed steps when --repeat is not given.", flag="budget",
          limits=bounds.BUDGET_S, shared=True),
    Lever("min_repeat", int, 5, "Fewest timed steps whatever the budget.", limits=bounds.REPEAT, shared=True),
    Lever("max_repeat", int, 100_000, "Most timed steps whatever the budget.", limits=bounds.REPEAT, shared=True),
    Lever("seed", int, 0, "Seed of the inputs' random generator.", limits=bounds.SEED, shared=True),
    Lever("threads", int, None, "CPU threads for torch and NumPy's BLAS (default: the libraries' own).",
          limits=cpu_threads, optional=True, shared=True),
    Lever("max_step_s", float, 30.0, "Refuse a configuration whose single step is estimated longer (seconds).",
          flag="max-step", limits=bounds.MAX_STEP_S, shared=True),
    Lever("check", bool, True, "Compare the result with the float64 reference.", shared=True),
    Lever("energy", bool, True, "Measure energy per step after the timed phase, where a counter is readable."),
    # -- the newer workloads' own parameters: live controls where the workload declares them ----
    # (default, choices and limits are the workload's Param's; -s NAME=VALUE sets them on the CLI)
    Lever("sdpa", str, None, "torch attention backend.", title="SDPA backend", key="v", shown=False,
          workloads=("attention",), refused_by="workloads.attention.unsupported"),
    Lever("mode", str, None, "torch autograd mode.", title="inference mode", key="m", shown=False,
          workloads=("inference",)),
    Lever("runtime", str, None, "Who runs the model: eager, torchscript, onnxruntime, tensorrt (build time apart).",
          title="runtime", key="u", shown=False, workloads=("inference",),
          variants=(("torchscript", "torchscript"), ("onnxruntime", "onnxruntime"), ("tensorrt", "tensorrt")),
          adjust=_after_runtime, refused_by="workloads.inference.runtime_refusal (core/runtimes)"),
    Lever("workers", int, None, "DataLoader worker processes (0: decode in the step).", title="loader workers",
          live_values=(0, 2, 4), key="w", shown=False, workloads=("dataloader",),
          refused_by="workloads.dataloader.unsupported (bounded by the cores)"),
    Lever("pin", str, None, "Pinned host memory for the batch.", title="pin memory", key="j", shown=False,
          workloads=("dataloader",), refused_by="workloads.dataloader.unsupported (an accelerator only)"),
    Lever("op", str, None, "Transfer operation.", title="transfer op", key="o", shown=False,
          workloads=("transfers",), refused_by="workloads.transfers.unsupported"),
    Lever("density", float, None, "Fraction of non-zero entries.", title="density",
          live_values=(0.001, 0.01, 0.05, 0.2), key="n", shown=False, workloads=("sparse",)),
    Lever("format", str, None, "Sparse storage: csr, or dense for the crossover.", title="format", key="y",
          shown=False, workloads=("sparse",)),
)  # fmt: skip

BY_NAME: Mapping[str, Lever] = {lv.name: lv for lv in LEVERS}


def spec_levers() -> tuple[Lever, ...]:
    """The levers that are RunSpec fields (set by CLI flags and deck fields)."""
    return tuple(lv for lv in LEVERS if not lv.is_param)


def live_levers() -> tuple[Lever, ...]:
    """The levers a key cycles, in the order the controls panel lists them."""
    return tuple(lv for lv in LEVERS if lv.live)


def get(name: str) -> Lever:
    return BY_NAME[name]


def adjust(spec: RunSpec, changed: str) -> RunSpec:
    """After the user changes `changed`, adjust the others so the combination makes sense."""
    rule = BY_NAME[changed].adjust if changed in BY_NAME else None
    kw = rule(spec) if rule else {}
    return spec.replace(**kw) if kw else spec


def variants() -> dict[str, dict[str, object]]:
    """What `compare --variants` and `sweep --variants` can put on top of each torch configuration."""
    out: dict[str, dict[str, object]] = {"base": {}}
    for lv in LEVERS:
        for name, value in lv.variants:
            out[name] = {lv.name: value}
    return out


def split_variant(name: str, workload: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A variant as (RunSpec fields, workload parameters); None where it is a parameter of other
    workloads (the `runtime` variants mean something for inference only)."""
    fields: dict[str, Any] = {}
    params: dict[str, Any] = {}
    for lever_name, value in variants()[name].items():
        lv = BY_NAME[lever_name]
        if lv.is_param and workload not in lv.workloads:
            return None
        (params if lv.is_param else fields)[lever_name] = value
    return fields, params


def shared_with_baseline(spec: RunSpec) -> dict[str, Any]:
    """The levers a NumPy-on-CPU baseline takes from the configuration it is the baseline of."""
    return {lv.name: lv.value(spec) for lv in LEVERS if lv.shared}


def conditions(spec: RunSpec) -> dict[str, Any]:
    """The levers a result names among its conditions, with their values."""
    return {lv.name: lv.value(spec) for lv in LEVERS if lv.condition}


def csv_columns() -> list[str]:
    return [lv.csv_column for lv in LEVERS]


def csv_cells(
    spec: RunSpec, conditions_: Mapping[str, Any], params: Mapping[str, Any] | None = None
) -> list[Any]:
    """One row's lever cells; a timed-transfers cell says what ran (the plan's verdict), not the ask;
    a workload parameter is blank for the workloads that have none. `params`: the workload's
    resolved parameters (its defaults filled in), when the caller has them."""
    cells: list[Any] = []
    for lv in LEVERS:
        if lv.csv_condition:
            cells.append(conditions_.get(lv.csv_column, ""))
        elif lv.is_param and not lv.applies_to(spec):
            cells.append("")
        elif lv.is_param and params is not None:
            cells.append(params.get(lv.name, ""))
        else:
            value = lv.value(spec)
            cells.append("" if value is None else value)
    return cells

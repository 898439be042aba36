"""Every bench's result as data: `save(name, figures)` writes bench/results/NAME.json beside what it prints.

The file holds the figures, the machine (CPU model, cores, memory, accelerator), the date, the command that made
it and the git commit, so that README's headline table and docs/benchmarks.md are generated from it, never typed.

    from bench.results import Record
    rec = Record("encoder", "Our encoder against transformers' eager BertModel")
    t = rec.table("BERT-base shape", ["tokens", "ours ms", "transformers ms", "ratio"])
    t.add(128, 122.9, 134.1, 0.92)
    rec.headline("encode ÷ transformers, 128 tokens, BERT-base shape", 0.92, target="≤ 0.9", met=False)
    rec.series("time against tokens", "tokens", "ms", [128, 512], {"ours": [122.9, 528.9], "transformers": [...]})
    rec.save()                                   # or save(name, figures) with a dict of your own

The figures tools/bench_docs.py renders (any bench that fills them is documented with no code of its own):
    title      what the bench compares, one line
    tables     [{"title", "columns", "rows"}]: one table each on docs/benchmarks.md
    headline   [{"label", "value", "unit", "target", "met"}]: README's table of headline figures
    series     [{"title", "x_label", "y_label", "x", "lines": {name: [y, ...]}}]: one SVG plot each
    notes      [str]: the conditions of the run (load average, threads, what was skipped)
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(os.environ.get("ATTENTION_LENS_BENCH_RESULTS", ROOT / "bench" / "results"))

# A figure counts only from a quiet machine: save() refuses to write a result when the 1-minute load average at the
# start of the bench (this module's import), or the cores other processes kept busy during the run (other_work), was
# above QUIET_LOAD, unless the bench was run with --allow-load; then the result says "measured_under_load" and the docs mark every figure of it so. The flag is
# taken off sys.argv here, once, so that every bench accepts it without an option of its own.
QUIET_LOAD = 1.5
ALLOW_LOAD = "--allow-load" in sys.argv[1:]
if ALLOW_LOAD:
    sys.argv = [a for a in sys.argv if a != "--allow-load"]


def _one_minute_load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def _machine_busy() -> float | None:
    """Return the CPU seconds every process on the machine has spent (Linux /proc/stat: all but idle and iowait)."""
    try:
        cpu = Path("/proc/stat").read_text().splitlines()[0].split()
        ticks = [int(v) for v in cpu[1:9]]  # user nice system idle iowait irq softirq steal
        return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _descendants_cpu() -> float:
    """Return the CPU seconds of this process's living descendants (browsers, servers, Ray's processes): a child
    still running is not in os.times() until it is waited for."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    hz = os.sysconf("SC_CLK_TCK")
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            parent[int(d.name)] = int(fields[1])
            cpu[int(d.name)] = (int(fields[11]) + int(fields[12])) / hz  # utime, stime
        except (OSError, ValueError, IndexError):
            continue
    total, frontier = 0.0, [os.getpid()]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        total += sum(cpu[c] for c in kids)
        frontier += kids
    return total


def _own_cpu() -> float:
    """CPU seconds of this bench: this process, its waited-for children and its living descendants."""
    return sum(os.times()[:4]) + _descendants_cpu()


def _adopt_orphans() -> None:
    """Make this process the child subreaper of its tree (Linux prctl): a descendant orphaned by its parent (Ray's
    workers when the raylet is killed, a browser's helpers) is re-parented here, not to init, and its CPU stays in
    /proc as long as this bench runs (an unreaped zombie keeps its times), so it is counted as the bench's own."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


if Path(sys.argv[0]).resolve().parent == ROOT / "bench":  # a bench run, not a test importing this module
    _adopt_orphans()
LOAD_AT_START = _one_minute_load()
_WALL_AT_START = time.monotonic()
_CPU_AT_START = sum(os.times()[:4])  # this process and its waited-for children, user + system
_OWN_AT_START = _own_cpu()
_BUSY_AT_START = _machine_busy()


def own_load() -> float:
    """Return the load this bench itself puts on the machine: its CPU seconds (children included) per wall second."""
    wall = time.monotonic() - _WALL_AT_START
    return (sum(os.times()[:4]) - _CPU_AT_START) / wall if wall > 0 else 0.0


class BusyMachine(SystemExit):
    """Raised by save() when the machine was busy and --allow-load was not given (exit status 3, one line)."""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine() -> dict[str, Any]:
    """Return what the figures depend on: CPU model, cores, memory, torch and its threads, the GPU if any."""
    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "load_average": load_average(),  # at the end of the run: other work slows every figure
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


def load_average() -> str:
    """Return the 1-, 5- and 15-minute load averages as text (other work on the machine slows every figure)."""
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def variant(name: str, *parts: str | None) -> str:
    """Return NAME-part-part for the parts that are not None: one file per thing measured (model, device, part)."""
    slugs = ["".join(c if c.isalnum() else "-" for c in p.lower()).strip("-") for p in parts if p]
    return "-".join([name, *[s for s in slugs if s]])


class Table:
    """One printed table, kept as data: a title, its columns and its rows (numbers stay numbers)."""

    def __init__(self, title: str, columns: list[str]):
        self.title, self.columns = title, list(columns)
        self.rows: list[list[Any]] = []

    def add(self, *values: Any) -> None:
        if len(values) != len(self.columns):
            raise ValueError(f"table {self.title!r}: {len(values)} values for {len(self.columns)} columns")
        self.rows.append([_plain(v) for v in values])

    def as_dict(self) -> dict[str, Any]:
        return {"title": self.title, "columns": self.columns, "rows": self.rows}


def _plain(v: Any) -> Any:
    """Numbers rounded to what the bench can tell apart (4 significant digits), everything else as JSON has it."""
    if isinstance(v, bool) or v is None or isinstance(v, int | str):
        return v
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if f != f or f in (float("inf"), float("-inf")):
        return None  # not measured (NaN) or unbounded: JSON has no such number
    return float(f"{f:.4g}")


class Record:
    """What one bench run prints, as data: tables, headline figures, series for plots and notes; save() writes it."""

    def __init__(self, name: str, title: str):
        self.name, self.title = name, title
        self.tables: list[Table] = []
        self.headlines: list[dict[str, Any]] = []
        self.plots: list[dict[str, Any]] = []
        self.notes: list[str] = []

    def table(self, title: str, columns: list[str]) -> Table:
        t = Table(title, columns)
        self.tables.append(t)
        return t

    def headline(
        self, label: str, value: float, unit: str = "", target: str | None = None, met: bool | None = None
    ) -> None:
        self.headlines.append({"label": label, "value": _plain(value), "unit": unit, "target": target, "met": met})

    def series(self, title: str, x_label: str, y_label: str, x: list[float], lines: dict[str, list[float]]) -> None:
        self.plots.append(
            {
                "title": title,
                "x_label": x_label,
                "y_label": y_label,
                "x": [_plain(v) for v in x],
                "lines": {k: [_plain(v) for v in ys] for k, ys in lines.items()},
            }
        )

    def note(self, text: str) -> None:
        self.notes.append(text)

    def figures(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "tables": [t.as_dict() for t in self.tables],
            "headline": self.headlines,
            "series": self.plots,
            "notes": self.notes,
        }

    def save(self, extra: dict[str, Any] | None = None) -> Path:
        """Write the record; extra: the bench's own figures kept beside what the docs render (raw rows, facts)."""
        return save(self.name, {**(extra or {}), **self.figures()})


def _command() -> str:
    """Return the command line that reran this bench: the settings it ran under (ATTENTION_LENS_*, OMP), then argv."""
    env = [
        f"{k}={shlex.quote(v)}"
        for k, v in sorted(os.environ.items())
        if (k.startswith("ATTENTION_LENS_") and k != "ATTENTION_LENS_BENCH_RESULTS") or k == "OMP_NUM_THREADS"
    ]
    argv = [os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:], *(["--allow-load"] if ALLOW_LOAD else [])]
    return " ".join([*env, "python", *(shlex.quote(a) for a in argv)])


def other_work() -> float:
    """Return the CPU rate of other work during the run: cores busy with processes that are not this bench's.

    The machine's busy CPU seconds (/proc/stat) less the bench's own (this process, its children and their
    descendants), per wall second since the start. A bench that oversubscribes the cores itself (sixteen browsers
    on two cores, Ray's actors) drives the load average far above the cores it uses, which is no one else's work;
    this counts CPU, not queue length. A descendant that exits unreaped counts as other work (the safe side).
    Without /proc/stat: the 1-minute load average now less the bench's own CPU rate.
    """
    busy, wall = _machine_busy(), time.monotonic() - _WALL_AT_START
    if busy is None or _BUSY_AT_START is None or wall <= 0:
        return _one_minute_load() - own_load()
    return max(0.0, (busy - _BUSY_AT_START) - (_own_cpu() - _OWN_AT_START)) / wall


def busiest_load() -> float:
    """Return the load from other work: the 1-minute load average at this bench's start, or the CPU rate of other
    work during the run (other_work), whichever is higher."""
    return max(LOAD_AT_START, other_work())


def save(name: str, figures: dict[str, Any], command: str | None = None) -> Path:
    """Write bench/results/NAME.json (figures, machine, date, command, commit) and return its path.

    Refuses (BusyMachine, exit 3) when the load average at the start, or other work's CPU rate during the run, was
    above QUIET_LOAD, unless --allow-load was given: then the result is written with "measured_under_load": true.
    """
    load = busiest_load()
    under_load = load > QUIET_LOAD
    if under_load and not ALLOW_LOAD:
        print(
            f"bench {name}: not written: the load from other work reached {load:.2f} (> {QUIET_LOAD}: the 1-minute "
            "load average at the start, or other processes' cores during the run); rerun on a "
            "quiet machine, or pass --allow-load to keep it marked 'measured under load'",
            file=sys.stderr,
        )
        raise BusyMachine(3)
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {
        "bench": name,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command or _command(),
        "commit": _commit(),
        "machine": machine(),
        "figures": figures,
    }
    doc["load_from_other_work"] = round(load, 2)  # what the docs judge by (the machine's load includes the bench)
    doc["load_average_at_end"] = round(_one_minute_load(), 2)  # the raw figure, the bench's own work included
    if under_load:
        doc["measured_under_load"] = True
        doc["load_at_start"] = round(LOAD_AT_START, 2)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {os.path.relpath(path, ROOT)}")
    return path

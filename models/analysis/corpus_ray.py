"""Corpus statistics on Ray Data: the same sums as the local engine, from a laptop to a cluster.

    python -m models stats --model minilm --file corpus/ --engine ray --workers 2 --out stats.json

Ray is an optional extra (`pip install -e ".[scale]"`) and is imported here only, when a run asks for it.
`ray.data` reads the input with one datasource (Ray's TextDatasource, as `read_text`, keeping each line's bytes so
that an undecodable line is counted rather than failing its file; Parquet rows, read with pyarrow as
`read_parquet` does, as the JSON lines they stand for: `read_parquet` followed by a map stalled a 2-CPU Ray with
two actors, Ray 2.60), `map_batches` runs an
actor pool (`SumsWorker`: one loaded model per actor, a GPU each with `device="cuda"`), every batch returns its
float64 sums (`models.analysis.corpus.chunk_sums`, the local engine's own function) as .npz bytes, and the driver
adds them as they stream in (`iter_batches`). Sums add up in any order, so the order batches finish in does not
matter; a killed actor is restarted and its batch retried (Ray Data's actor pool restarts actors and retries
their tasks by default), and a batch's sums are either counted once or not yet at all.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import settings
from ..errors import InputError
from .corpus import (
    BATCH_ROWS,
    CorpusSums,
    check_text_file,
    check_token_budget,
    chunk_sums,
    corpus_files,
    parquet_columns,
    parquet_raw,
    parse_rows,
    raw_cap,
    split_raw,
)

if TYPE_CHECKING:
    import pyarrow

INSTALL = 'pip install -e ".[scale]"  (or: pip install "ray[data]==2.60.0")'
IN_FLIGHT = 2  # batches queued per actor: one running, one waiting; the driver never holds more than these
STORE_BATCHES = 4  # a local Ray's object store holds this many × workers × IN_FLIGHT batches' sums (`store_bytes`)
STORE_MIN = 256 << 20  # … and at least this: input blocks, Ray Data's own objects


def batch_bytes(n_layers: int, n_heads: int, context_width: int) -> int:
    """Return the bytes of one batch's sums as `CorpusSums.to_bytes` sends them (float64): the CKA moment's upper
    triangle over every head's context vector (n_layers × context_width), three JS parts and the Gram over the
    heads, a few statistics per head."""
    F, N = n_layers * context_width, n_layers * n_heads
    return 8 * (F * (F + 1) // 2 + F + 4 * N * N + 16 * N)


def store_bytes(workers: int, per_batch: int) -> int:
    """Return the object store a local Ray starts with: room for STORE_BATCHES × workers × IN_FLIGHT batches' sums.

    Bounded on purpose. The driver maps the store's pages as it reads each batch's sums, and its resident memory
    counts every page it has read: with Ray's default store (30 % of RAM) the allocator kept placing new batches on
    pages not read before, and the driver's peak grew with the corpus (minilm, 2 workers: 487 MB of store pages at
    2,400 lines, 812 MB at 24,000). With the store sized to the batches in flight, the pages it can read are bounded
    whatever the corpus. A cluster's store is the cluster's own setting."""
    return max(STORE_MIN, STORE_BATCHES * workers * IN_FLIGHT * per_batch)


class RayMissing(InputError):
    """Ray is not installed: `--engine ray` says how to install it."""


def import_ray() -> Any:
    """Return the ray module, or raise RayMissing with the one line that says how to install it."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise RayMissing(f"--engine ray needs Ray, which is not installed: {INSTALL}") from None
    return ray


def _rows_datasource() -> type:
    """Return the datasource class: Ray's TextDatasource reading each row as {"raw": bytes, "fmt": str}."""
    from ray.data._internal.datasource.text_datasource import TextDatasource

    class RowsDatasource(TextDatasource):
        """Lines of .txt / .jsonl files kept as bytes (decoded by the actor, so that a bad one is only counted);
        over-long lines marked "long"; Parquet rows as the JSON lines they stand for (`parquet_raw`)."""

        def __init__(self, paths: list[str], fmt: str, cap: int, **kwargs: Any):
            super().__init__(paths, **kwargs)
            self.fmt, self.cap = fmt, cap

        def _table(self, raws: list[bytes], fmts: list[str]) -> Any:
            import pyarrow as pa

            return pa.table({"raw": pa.array(raws, pa.binary()), "fmt": pa.array(fmts, pa.string())})

        def _read_stream(self, f: pyarrow.NativeFile, path: str) -> Iterator[Any]:
            if self.fmt == "parquet":
                import pyarrow as pa
                import pyarrow.parquet as pq

                cols = parquet_columns(Path(path))
                data = pa.BufferReader(f.readall())  # Ray's stream does not seek; Parquet's footer is at the end
                for batch in pq.ParquetFile(data).iter_batches(batch_size=8192, columns=cols):
                    a = batch.column("text").to_pylist()
                    b = batch.column("text_b").to_pylist() if "text_b" in cols else [None] * len(a)
                    yield self._table([parquet_raw(x, y) for x, y in zip(a, b, strict=True)], ["jsonl"] * len(a))
                return
            rows = split_raw(f.readall())
            for i in range(0, len(rows), 8192):
                part = rows[i : i + 8192]
                fmts = ["long" if len(r) > self.cap else self.fmt for r in part]
                yield self._table([b"" if len(r) > self.cap else r for r in part], fmts)

    return RowsDatasource


class SumsWorker:
    """A Ray Data actor: loads the model once, then turns each batch of input rows into its CorpusSums."""

    def __init__(
        self, model: str, mask: Any, device: str | None, dtype: str | None, env: dict[str, str], pair_cut: int | None
    ):
        self.pair_cut = pair_cut  # the redundancy sample (models.analysis.corpus.redundancy_cut), as the driver's
        os.environ.update(env)  # the operator's ATTENTION_LENS_* budgets, as the driver has them
        from ..weights import load_encoder

        self.encoder = load_encoder(model, device=device or "auto", dtype=dtype or "fp32")
        self.mask = mask
        self.pid = os.getpid()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        chunk = parse_rows(zip(batch["raw"], batch["fmt"], strict=True))
        sums = chunk_sums(
            self.encoder, chunk.lines, self.mask, read=chunk.read, skipped=chunk.skipped, pair_cut=self.pair_cut
        )
        return {"sums": np.array([sums.to_bytes()], dtype=object), "pid": np.array([self.pid], dtype=np.int64)}


def dataset(path: str | Path) -> Any:
    """Return the ray.data Dataset of a `--file` path's rows as {"raw", "fmt"} (reads are lazy, num_cpus 0)."""
    ray = import_ray()
    cap = raw_cap()
    files = corpus_files(path)
    parts = []
    rows_ds = _rows_datasource()
    for fmt in ("txt", "jsonl", "parquet"):
        names = [str(f) for f, k in files if k == fmt]
        for name in names:
            if fmt == "parquet":
                parquet_columns(Path(name))  # no column text: refused here, in one line
            else:
                check_text_file(Path(name))
        if names:
            parts.append(ray.data.read_datasource(rows_ds(names, fmt, cap), num_cpus=0))
    out = parts[0]
    return out.union(*parts[1:]) if len(parts) > 1 else out


def run_ray(
    model: str,
    path: str | Path,
    n_layers: int,
    n_heads: int,
    *,
    mask: Any = None,
    workers: int = 1,
    batch_rows: int = BATCH_ROWS,
    device: str | None = None,
    dtype: str | None = None,
    address: str | None = None,
    context_width: int | None = None,
    on_batch: Callable[[CorpusSums, CorpusSums, int], None] | None = None,
    reduce: Callable[[CorpusSums, CorpusSums], CorpusSums] | None = None,
    pair_cut: int | None = None,
) -> CorpusSums:
    """Return the CorpusSums of a `--file` path computed on Ray: `workers` actors, batches of `batch_rows` rows.

    Joins the cluster at `address` (or RAY_ADDRESS); without either, and when Ray is not running in this process
    yet, starts a local Ray on this machine's cores, with an object store sized to the batches in flight (`store_bytes`;
    context_width: each layer's heads × d_k, which sizes a batch's sums), and shuts it down at the end. on_batch(batch, total, pid) after
    each batch reduced (progress; pid: the actor's process). reduce: how a batch joins the total (tests plant a
    wrong one here); the default adds it. pair_cut: the redundancy sample (`redundancy_cut`; None: every line).
    """
    ray = import_ray()
    started = False
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS") or None
        kw: dict[str, Any] = dict(log_to_driver=False, configure_logging=False)
        if address is None:  # a local Ray on this machine's cores (a cluster's own settings are its own)
            kw.update(num_cpus=max(os.cpu_count() or 1, workers), include_dashboard=False)
            if context_width is not None:
                kw.update(object_store_memory=store_bytes(workers, batch_bytes(n_layers, n_heads, context_width)))
        ray.init(address=address, **kw)
        started = True
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        env = {k: v for k, v in os.environ.items() if k.startswith(settings.PREFIX) or k.startswith("HF_")}
        out = dataset(path).map_batches(
            SumsWorker,
            fn_constructor_kwargs=dict(model=model, mask=mask, device=device, dtype=dtype, env=env, pair_cut=pair_cut),
            batch_size=batch_rows,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=workers, max_tasks_in_flight_per_actor=IN_FLIGHT),
            num_cpus=1,
            num_gpus=1 if (device or "").startswith("cuda") else 0,
            # A killed actor comes back and its batch runs again (counted once, when it returns): Ray Data's actor
            # pool sets max_restarts=-1 and max_task_retries=-1 itself (2.60; passing them is deprecated), and
            # test_corpus_ray kills an actor mid-run to hold it to that.
        )
        total = CorpusSums(n_layers, n_heads)
        add = reduce or CorpusSums.merge
        for batch in out.iter_batches(batch_size=1, batch_format="numpy", prefetch_batches=1):
            for data, pid in zip(batch["sums"], batch["pid"], strict=True):
                part = CorpusSums.from_bytes(bytes(data))
                total = add(total, part)
                check_token_budget(total)
                if on_batch is not None:
                    on_batch(part, total, int(pid))
        return total
    finally:
        if started:
            ray.shutdown()

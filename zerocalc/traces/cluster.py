"""Reading trace files on a running Dask distributed cluster (``--scheduler tcp://HOST:PORT``).

The reader's units of work go to the cluster's workers as they do to local worker processes:
one task per file, and one per chunk of about one block of a large plain NCCL log
(:func:`zerocalc.traces.reader._scan_range`, cut where a local read cuts it); this process
gathers the results in file and chunk order and joins them as a local read does, so the table,
its metadata and the skip log are the same. The workers read the files by the paths given here:
they must see the same files at the same paths (one machine, or a shared file system).

Dask is an optional extra (``pip install 'zerocalc[dask]'``), imported only here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from zerocalc.errors import ConfigError

OPTION = "--scheduler"
#: Seconds to wait for the scheduler to answer.
CONNECT_TIMEOUT_S = 10


def connect(address: str) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address``; :class:`ConfigError` when Dask is
    not installed or the scheduler does not answer."""
    try:
        from distributed import Client
    except ImportError:
        raise ConfigError("needs Dask's distributed scheduler: pip install 'zerocalc[dask]'",
                          option=OPTION) from None
    if "://" not in address:
        raise ConfigError(f"{address!r} is not a scheduler address (tcp://HOST:PORT)", option=OPTION)
    try:
        return Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ConfigError(f"cannot reach the Dask scheduler at {address}: {exc}", option=OPTION) from None


def run(address: str, fn: Callable, jobs: Sequence[tuple], on_done: Callable[[int], None] | None = None
        ) -> list[Any]:
    """``[fn(*job) for job in jobs]``, each call a task on the cluster at ``address``, in order;
    ``on_done(i)`` as job ``i`` finishes.

    An exception a task raises (a :class:`~zerocalc.errors.TraceFormatError` naming its file and
    line) is raised here as it was raised there.
    """
    client = connect(address)  # first: says what to install when Dask is missing
    from distributed import as_completed

    try:
        futures = [client.submit(fn, *job, pure=False) for job in jobs]
        if on_done is not None:
            index = {f.key: i for i, f in enumerate(futures)}
            for future in as_completed(futures):
                on_done(index[future.key])
        return client.gather(futures)
    finally:
        client.close()

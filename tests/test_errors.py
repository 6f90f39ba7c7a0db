"""Errors are typed, also builtins, and survive a process boundary (parallel trace reads)."""

import pickle

import pytest

from zerocalc.errors import ConfigError, TraceFormatError, UnknownNameError, ZerocalcError


@pytest.mark.parametrize("exc", [
    TraceFormatError("rank3.json.gz", 17, "not valid JSON"),
    TraceFormatError("nccl.log", None, "truncated gzip stream"),
    ConfigError("must be ≥ 1", option="--n"),
    ConfigError("no option"),
    UnknownNameError("scheme", "zero4", ["zero1", "zero2"]),
])
def test_round_trips_through_pickle(exc):
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and str(back) == str(exc)
    assert isinstance(back, ZerocalcError)


def test_messages_name_where():
    assert str(TraceFormatError("a.txt", 3, "bad count")) == "a.txt:3: bad count"
    assert str(ConfigError("must be ≥ 1", option="--n")) == "--n: must be ≥ 1"
    assert isinstance(UnknownNameError("topology", "x", ["dgx-a100"]), KeyError)
    assert str(UnknownNameError("topology", "x", ["dgx-a100"])) == "unknown topology 'x'; known: dgx-a100"

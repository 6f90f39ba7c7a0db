"""NCCL_IB_HCA on an NVLink preset: NCCL uses only the devices the list selects (NCCL's environment
documentation, NCCL_IB_HCA: "=" for an exact list, otherwise each entry a prefix of device names), so a run
on fewer rails than the preset's NICs is priced on those."""

import pytest
from sweep_files import check_json, with_lines_before_table

from zerocalc.topology.stated import at_most_hcas

H100_IB = "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt"  # 2 DGX H100 hosts, 8 NICs of 400 Gb/s each


@pytest.mark.parametrize(("value", "most"), [
    ("mlx5_0", 1),                   # a prefix, but no device is numbered 0n: one rail
    ("mlx5_0:1", 1),                 # its port 1
    ("=mlx5_0,mlx5_1", 2),           # an exact list
    ('"=mlx5_0,mlx5_1,mlx5_2,mlx5_3"', 4),
    ("mlx5_1", None),                # also selects mlx5_10, mlx5_11
    ("mlx5_0,mlx5_3", None),
    ("mlx5", None), ("mlx5_", None),  # every ConnectX device
    ("^mlx5_1", None),               # an exclusion
])
def test_at_most_hcas_follows_nccl_s_matching(value, most):
    assert at_most_hcas(value) == most


def _last_row(path):
    sweep = check_json(path)
    return sweep, sweep["rows"][-1]


def test_one_rail_prices_the_network_at_one_nic(tmp_path):
    line = "bm-h100-01:29250:29250 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0"
    sweep, row = _last_row(with_lines_before_table(tmp_path, H100_IB, [line]))
    assert "NCCL uses 1 of the preset's 8 NICs a node" in sweep["topology_how"]
    # each byte of a node's share crosses its one NIC at least once: 400 Gb/s = 50 GB/s bounds the time below
    assert row["predicted_s"] >= row["bytes"] / 50e9
    _, base = _last_row(H100_IB)
    assert base["bytes"] == row["bytes"] and base["predicted_s"] < row["bytes"] / 50e9 / 4  # 8 rails


def test_a_prefix_that_may_select_more_keeps_the_preset_s_nics(tmp_path):
    line = "bm-h100-01:29250:29250 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_1"
    sweep, row = _last_row(with_lines_before_table(tmp_path, H100_IB, [line]))
    _, base = _last_row(H100_IB)
    assert "NCCL_IB_HCA" not in sweep["topology_how"] and row["predicted_s"] == base["predicted_s"]

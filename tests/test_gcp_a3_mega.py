"""GCP A3 Mega (a3-megagpu-8g, GPUDirect-TCPXO): the gcp-a3-mega preset's network timing and NCCL profile
against their sources, on the bundled A3 Mega all-reduce priced without a stated NCCL version."""

from sweep_files import check_json, file_rows

from zerocalc.nccl.env import profile_for
from zerocalc.topology import get_topology

NAME = "all_reduce_perf-16xH100-2nodes.txt"


def test_tcpxo_is_timed_with_no_wire_latency():
    """google/nccl-plugin-gpudirect-tcpxo: nccl_shim.cc GetProperties sets props.latency = 0, and its data
    path is an RDMA offload on Google's IPUs (README.md), not the guest's TCP stack whose VM-to-VM round
    trip A3 High's TCPX steps are timed with; Google publishes no figure for it, so none is timed."""
    mega, high = get_topology("gcp-a3-mega"), get_topology("gcp-a3-high")
    assert mega.net_latency_us == 0.0 and mega.net_wire_latency_us is None
    assert high.net_wire_latency_us is not None


def test_an_unversioned_a3_mega_run_gets_the_plugins_last_profile():
    """The file states no NCCL version: priced as NCCL 2.30.7 under the plugin's own profile
    (tcpxo_scripts/nccl-env-profile.sh, v1.0.12-v1.0.17: NCCL_PROTO=Simple,LL128, NCCL_MIN_NCHANNELS=4),
    so no row runs LL. By hand (v2.30.7 tuning.cc: Tree base latency LL128 14.0 µs, NVLink hop 1.25, network
    hop 8.5; the plugin's latency 0): a Tree all-reduce on 2 nodes of 8 is 14.0 + 2 × (7 × 1.25 + 8.5) =
    48.5 µs at 8 B, where Tree/LL's 6.8 + 2 × (7 × 0.6 + 5.0) = 25.2 µs was priced without the profile.
    The run itself measured 136 µs there (its source's installer shipped NCCL 2.21.5, Simple alone)."""
    sweep = check_json(NAME)
    assert sweep["nccl_version"] == "2.30.7" and sweep["topology"] == "gcp-a3-mega"
    env = profile_for(get_topology("gcp-a3-mega"), "2.30.7")
    assert (env.proto, env.min_nchannels) == ("Simple,LL128", 4)
    assert any("NCCL_PROTO=Simple,LL128" in n and "NCCL_MIN_NCHANNELS=4" in n for n in sweep["notes"])
    assert {r["protocol"] for r in sweep["rows"]} <= {"Simple", "LL128"}
    rows = {r["bytes"]: r for r in sweep["rows"]}
    measured = {s: o for s, o, _ in file_rows(NAME)}
    assert (rows[8]["algorithm"], rows[8]["protocol"]) == ("Tree", "LL128")
    assert abs(rows[8]["predicted_s"] * 1e6 - (14.0 + 2 * (7 * 1.25 + 8.5))) < 0.1
    assert abs(rows[8]["ratio"] - rows[8]["predicted_s"] * 1e6 / measured[8]) < 0.01

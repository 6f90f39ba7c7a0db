"""Topology presets, TOML-shaped mappings and user overrides."""

import pytest

from zerocalc.errors import ConfigError, UnknownNameError
from zerocalc.topology import PRESETS, Link, get_topology, topology_from_mapping


def test_presets_exist_with_sources():
    assert {"dgx-a100", "dgx-h100", "pcie-gen4", "ethernet-100g"} <= set(PRESETS)
    for t in PRESETS.values():
        assert t.source and t.gpus_per_node >= 1


def test_preset_numbers_from_datasheets():
    a100, h100 = get_topology("dgx-a100"), get_topology("dgx-h100")
    assert a100.intra.bw_Bps == 300e9  # NVLink3: 600 GB/s bidirectional
    assert a100.inter.bw_Bps == 8 * 200e9 / 8  # 8 × 200 Gb/s
    assert h100.intra.bw_Bps == 450e9  # NVLink4: 900 GB/s bidirectional
    assert h100.inter.bw_Bps == 8 * 400e9 / 8  # 8 × 400 Gb/s
    assert get_topology("ethernet-100g").inter.bw_Bps == 100e9 / 8


def test_unknown_topology():
    with pytest.raises(UnknownNameError, match="dgx-a100"):
        get_topology("dgx-z9")


def test_mapping_round_trip():
    t = topology_from_mapping({"name": "lab", "gpus_per_node": 4,
                               "intra": {"alpha_us": 2, "bw_GBps": 100},
                               "inter": {"alpha_us": 10, "bw_GBps": 12.5}}, where="lab.toml")
    assert (t.name, t.gpus_per_node) == ("lab", 4)
    assert t.intra == Link(2e-6, 100e9) and t.inter == Link(10e-6, 12.5e9)


@pytest.mark.parametrize(
    ("data", "match"),
    [({"gpus_per_node": 8, "intra": {"alpha_us": 1, "bw_GBps": 1}}, r"\[inter\]"),
     ({"gpus_per_node": 0, "intra": {"alpha_us": 1, "bw_GBps": 1}, "inter": {"alpha_us": 1, "bw_GBps": 1}},
      "gpus_per_node"),
     ({"gpus_per_node": 8, "intra": {"alpha_us": 1, "bw_GBps": "fast"},
       "inter": {"alpha_us": 1, "bw_GBps": 1}}, "bw_GBps"),
     ({"gpus_per_node": 8, "intra": {"alpha_us": 1, "bw_GBps": 0}, "inter": {"alpha_us": 1, "bw_GBps": 1}},
      "positive"),
     ({"gpus_per_node": 8, "nics": 2, "intra": {"alpha_us": 1, "bw_GBps": 1},
       "inter": {"alpha_us": 1, "bw_GBps": 1}}, "unknown keys")],
)
def test_mapping_errors_name_the_file(data, match):
    with pytest.raises(ConfigError, match=match) as info:
        topology_from_mapping(data, where="lab.toml")
    assert "lab.toml" in str(info.value)


def test_overrides():
    t = get_topology("dgx-a100").with_overrides(inter_bw_GBps=400)
    assert t.inter.bw_Bps == 400e9 and t.intra == get_topology("dgx-a100").intra
    assert t.name == "dgx-a100+custom"
    with pytest.raises(ConfigError):
        get_topology("dgx-a100").with_overrides(intra_bw_GBps=0)


@pytest.mark.parametrize(
    ("flags", "message"),
    # the flag the user typed and the value in the user's units (GB/s, µs), not bw_Bps = -3e9
    [({"intra_bw_GBps": -3}, "--intra-bw-GBps: must be positive, got -3"),
     ({"inter_bw_GBps": 0}, "--inter-bw-GBps: must be positive, got 0"),
     ({"inter_alpha_us": -1}, "--inter-alpha-us: must be non-negative, got -1"),
     ({"intra_alpha_us": float("nan")}, "--intra-alpha-us: must be non-negative, got nan")],
)
def test_override_errors_name_the_flag_in_user_units(flags, message):
    with pytest.raises(ConfigError) as info:
        get_topology("dgx-a100").with_overrides(**flags)
    assert str(info.value) == message


def test_override_alpha_zero_is_allowed():
    assert get_topology("dgx-a100").with_overrides(inter_alpha_us=0).inter.alpha_s == 0.0


_OK_TIER = {"alpha_us": 1, "bw_GBps": 1}


@pytest.mark.parametrize(
    ("data", "message"),
    [({"gpus_per_node": 8, "intra": {"alpha_us": 1, "bw_GBPS": 1}, "inter": _OK_TIER},
      "--topology: lab.toml: [intra] unknown keys: 'bw_GBPS' (known: alpha_us, bw_GBps)"),
     ({"gpus_per_node": 8, "intra": _OK_TIER, "inter": {**_OK_TIER, "nics": 8}},
      "--topology: lab.toml: [inter] unknown keys: 'nics' (known: alpha_us, bw_GBps)"),
     ({"gpus_per_node": 8, "intra": {"bw_GBps": 1}, "inter": _OK_TIER},
      "--topology: lab.toml: [intra] missing key 'alpha_us'"),
     ({"gpus_per_node": 8, "intra": _OK_TIER, "inter": {"alpha_us": 1, "bw_GBps": -5}},
      "--topology: lab.toml: [inter] bw_GBps must be positive, got -5"),
     ({"gpus_per_node": 8, "intra": _OK_TIER, "inter": {"alpha_us": 1, "bw_GBps": 0}},
      "--topology: lab.toml: [inter] bw_GBps must be positive, got 0"),
     ({"gpus_per_node": 8, "intra": {"alpha_us": -1, "bw_GBps": 1}, "inter": _OK_TIER},
      "--topology: lab.toml: [intra] alpha_us must be non-negative, got -1")],
)
def test_toml_errors_are_prefixed_with_option_and_file(data, message):
    with pytest.raises(ConfigError) as info:
        topology_from_mapping(data, where="lab.toml", option="--topology")
    assert str(info.value) == message


def test_hardware_fields_from_datasheets():
    a100, h100 = get_topology("dgx-a100"), get_topology("dgx-h100")
    # DGX A100: A100 SXM4 (sm80), 12 NVLink3 links, NVSwitch gen 2, 8× HDR 200 Gb/s, AMD EPYC 7742
    assert (a100.compute_capability, a100.nvlinks_per_gpu, a100.nvswitch_gen) == (80, 12, 2)
    assert (a100.nics_per_node, a100.nic_Gbps, a100.cpu_vendor) == (8, 200.0, "amd")
    assert a100.in_network_reduction_kind is None and not a100.nvls
    # DGX H100: sm90, 18 NVLink4 links, NVSwitch gen 3 (NVLink SHARP), 8× NDR 400 Gb/s, Intel
    assert (h100.compute_capability, h100.nvlinks_per_gpu, h100.nvswitch_gen) == (90, 18, 3)
    assert (h100.nics_per_node, h100.nic_Gbps, h100.cpu_vendor) == (8, 400.0, "intel")
    assert h100.in_network_reduction_kind == "nvls" and h100.nvls and not h100.sharp


def test_toml_hardware_fields_round_trip_and_old_files_still_load():
    from zerocalc.topology import topology_to_mapping

    h100 = get_topology("dgx-h100")
    assert topology_from_mapping(topology_to_mapping(h100)) == h100
    old = topology_from_mapping({"gpus_per_node": 8, "intra": {"alpha_us": 1, "bw_GBps": 1},
                                 "inter": {"alpha_us": 1, "bw_GBps": 1}})
    assert old.compute_capability is None and old.in_network_reduction_kind is None
    both = topology_from_mapping({"gpus_per_node": 8, "in_network_reduction": ["SHARP", "nvls"],
                                  "intra": {"alpha_us": 1, "bw_GBps": 1},
                                  "inter": {"alpha_us": 1, "bw_GBps": 1}})
    assert both.in_network_reduction_kind == "nvls+sharp"


@pytest.mark.parametrize(("extra", "match"), [
    ({"in_network_reduction": ["infiniband"]}, "in_network_reduction: unknown kind 'infiniband'"),
    ({"nic_Gbps": 0}, "nic_Gbps must be a positive number"),
    ({"compute_capability": 9.0}, "compute_capability must be a whole number"),
    ({"cpu_vendor": "via"}, "cpu_vendor: must be one of intel, amd, arm"),
    # NVLink of a generation on no link: every NVLink time divides by the links (a division by zero before)
    ({"nvlink_gen": 4, "nvlinks_per_gpu": 0}, "nvlinks_per_gpu: must be ≥ 1 where nvlink_gen is 4"),
])
def test_toml_hardware_field_errors(extra, match):
    with pytest.raises(ConfigError, match=match) as info:
        topology_from_mapping({"gpus_per_node": 8, **extra, "intra": {"alpha_us": 1, "bw_GBps": 1},
                               "inter": {"alpha_us": 1, "bw_GBps": 1}}, where="lab.toml")
    assert "lab.toml" in str(info.value)


def test_require_names_the_missing_field():
    from zerocalc.topology import require

    old = topology_from_mapping({"name": "lab", "gpus_per_node": 8, "intra": {"alpha_us": 1, "bw_GBps": 1},
                                 "inter": {"alpha_us": 1, "bw_GBps": 1}})
    with pytest.raises(ConfigError, match="does not give compute_capability"):
        require(old, "compute_capability", "NCCL's cost model")


def test_dgx_b300_from_its_datasheet_and_its_toml_round_trips():
    """NVIDIA DGX B300 datasheet: 8 B300 on NVLink5 (18 links, 1.8 TB/s both ways per GPU, NVSwitch gen 4
    with NVLink SHARP), 8 ConnectX-8 of 800 Gb/s (one per GPU, PCIe Gen6), Intel Xeon hosts; compute
    capability 10.3 (NVIDIA CUDA GPUs page). Written as TOML and read back it is the same machine."""
    import tomllib

    from zerocalc.topology import topology_to_toml

    b300 = get_topology("dgx-b300")
    assert (b300.gpus_per_node, b300.compute_capability, b300.nvlink_gen) == (8, 103, 5)
    assert b300.nvlinks_per_gpu == 18
    assert (b300.nvswitch_gen, b300.nvls, b300.pcie_gen) == (4, True, 6)
    assert (b300.nics_per_node, b300.nic_Gbps, b300.cpu_vendor) == (8, 800.0, "intel")
    assert b300.intra.bw_Bps == pytest.approx(1.8e12 / 2)  # each way
    assert b300.inter.bw_Bps == pytest.approx(8 * 800e9 / 8)
    assert topology_from_mapping(tomllib.loads(topology_to_toml(b300))) == b300


def test_toml_compute_capability_as_cuda_writes_it_names_nccls_form():
    # CUDA writes Hopper's capability "9.0"; NCCL's topology (src/graph/topo.cc) keeps major*10+minor: 90
    with pytest.raises(ConfigError) as info:
        topology_from_mapping({"gpus_per_node": 8, "compute_capability": 9.0, "intra": _OK_TIER,
                               "inter": _OK_TIER}, where="lab.toml")
    assert "90 for 9.0" in str(info.value)


def _calibrated(**pair):
    fit = {"op": "all_reduce", "ranks": 16, "algorithm": "Ring", "protocol": "Simple", "alpha_us": 20.0,
           "bw_GBps": 100.0, **pair}
    return topology_from_mapping({"gpus_per_node": 8, "intra": _OK_TIER, "inter": _OK_TIER,
                                  "nccl_calibration": [fit]}, where="lab.toml", option="--topology")


def test_toml_calibration_names_in_any_case_are_nccls():
    # NCCL's own names (src/init.cc ncclAlgoStr "NVLSTree", ncclProtoStr "LL128"), as NCCL_ALGO reads
    # them: strcasecmp, any case
    (fit,) = _calibrated(algorithm="nvlstree", protocol="ll128", op="ALL_REDUCE").nccl_calibration
    assert (fit.op, fit.algorithm, fit.protocol) == ("all_reduce", "NVLSTree", "LL128")


@pytest.mark.parametrize(("pair", "message"), [
    ({"op": "allreduce"}, "op must be one of broadcast, reduce, all_gather, reduce_scatter, all_reduce, "),
    ({"algorithm": "NVLS_Tree"}, "algorithm must be one of Tree, Ring, CollNetDirect, CollNetChain, NVLS, "),
    ({"protocol": 128}, "protocol must be one of LL, LL128, Simple, any, got 128"),
])
def test_toml_calibration_name_nothing_matches_is_refused(pair, message):
    # before, such a fit loaded and was never used: the table priced NCCL's own time in silence
    with pytest.raises(ConfigError) as info:
        _calibrated(**pair)
    assert str(info.value).startswith("--topology: lab.toml: [[nccl_calibration]] #1: " + message)


def test_a_toml_without_the_hardware_keys_is_told_them_all_at_once():
    # README: NCCL's model needs compute_capability, nvlink_gen, nvswitch_gen, pcie_gen, nics_per_node,
    # nic_Gbps, cpu_vendor and in_network_reduction; before, one was named a run, in_network_reduction first
    from zerocalc.nccl import release_for
    from zerocalc.nccl.model import tune

    plain = topology_from_mapping({"gpus_per_node": 8, "intra": _OK_TIER, "inter": _OK_TIER})
    with pytest.raises(ConfigError) as info:
        tune(plain, 16, release_for("2.26.2")[0])
    assert ("does not give compute_capability, nvlink_gen, nvswitch_gen, pcie_gen, nics_per_node, nic_Gbps, "
            "cpu_vendor, in_network_reduction, which NCCL's cost model needs") in str(info.value)

"""Tuner plugin rules (NCCL's example tuner CSV) and the vendor NCCL environment of a topology."""

import json
import tomllib

import pytest
from sweep_files import DATA, file_rows
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import ConfigError
from zerocalc.nccl import Algorithm as A
from zerocalc.nccl import Collective as C
from zerocalc.nccl import Protocol as P
from zerocalc.nccl import release_for, restrictions, tune
from zerocalc.nccl.env import profile_for, settings
from zerocalc.nccl.tuner import check_rules, parse_tuner, tuned_choice, tuner_api
from zerocalc.topology import get_topology, topology_from_mapping, topology_to_mapping

runner = CliRunner()

H100 = get_topology("dgx-h100")

CSV = """\
# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
allreduce,0,65535,ring,simple,4,-1,-1
allreduce, 65536 , 1073741824 ,tree,ll128,-1,2,16,-1,-1
allgather,0,4294967295,ring,simple,2,4,-1
"""


def rules(text=CSV, name="t.csv"):
    return parse_tuner(text.splitlines(), name)


def test_csv_rules_read_as_nccl_example_plugin_reads_them():
    cfg = rules()
    assert [(r.collective, r.min_bytes, r.max_bytes, r.algorithm, r.protocol, r.channels, r.line)
            for r in cfg.rules] == [
        (C.ALL_REDUCE, 0, 65535, A.RING, P.SIMPLE, 4, 2),
        (C.ALL_REDUCE, 65536, 1 << 30, A.TREE, P.LL128, -1, 3),
        (C.ALL_GATHER, 0, 4294967295, A.RING, P.SIMPLE, 2, 4)]
    # the optional numPipeOps and regBuff read as -1 ("any") when absent (plugin.c)
    assert (cfg.rules[0].num_pipe_ops, cfg.rules[0].reg_buff) == (-1, -1)
    # byte bounds are inclusive: 65535 is the first rule's, 65536 the second's
    first, second = cfg.rules[:2]
    assert first.matches(C.ALL_REDUCE, 65535, 2, 16) and not first.matches(C.ALL_REDUCE, 65536, 2, 16)
    assert second.matches(C.ALL_REDUCE, 65536, 2, 16) and not second.matches(C.ALL_REDUCE, 65536, 2, 8)


@pytest.mark.parametrize(("text", "needle"), [
    ("allreduce,0,10,ring,simple,4,-1\n", "t.csv:1: expected 8 to 10 comma-separated fields"),
    ("# c\nallreduce,0,10,Ring,simple,4,-1,-1\n", "t.csv:2: algorithm 'Ring' is not a name"),
    ("allreduce,0,10,ring,simple,4,-1,-1,1,1,7\n", "got 11"),
    ("allreduce,0,10,ring,simple,4,,-1\n", "with an empty one"),
    ("all_reduce,0,10,ring,simple,4,-1,-1\n", "collective_type 'all_reduce'"),
    ("allreduce,10,0,ring,simple,4,-1,-1\n", "min_bytes 10 is above max_bytes 0"),
    ("allreduce,0,1e3,ring,simple,4,-1,-1\n", "max_bytes must be a whole number"),
    ("allreduce,0,10,ring,simple,0,-1,-1\n", "channels must be -1 or ≥ 1, got 0"),
    ("allreduce,0,10,ring,simple,4,-1,-1,1,2\n", "regBuff must be 0, 1 or -1"),
    ("# only comments\n\n", "t.csv: no tuner rules"),
    ("# proto-file: config_proto/tuner_config.proto\n# proto-message: TunerConfigs\ncommunicator_configs {\n",
     "t.csv:1: a protobuf text file"),
    ("communicator_configs {\n  node_range: { min: 2 }\n}\n", "t.csv:1: a protobuf text file"),
])
def test_bad_tuner_files_name_file_and_line(text, needle):
    with pytest.raises(ConfigError) as e:
        rules(text)
    assert needle in str(e.value) and e.value.option == "--nccl-tuner"


def test_tuner_api_by_nccl_version():
    """nccl_tuner.h of each release: ncclTunerPlugin_v1 in 2.19, v2 in 2.21, v3 from 2.22 (v6 in 2.30)."""
    versions = ("2.19.3", "2.20.5", "2.21.5", "2.22.3", "2.26.2", "2.30.7")
    assert [tuner_api(v) for v in versions] == [1, 1, 2, 3, 3, 3]
    with pytest.raises(ConfigError, match="no tuner plugin API"):
        tuner_api("2.18.5")


def _tuning(version="2.30.7", topo=H100, n=16, algo=None, proto=None):
    return tune(topo, n, release_for(version)[0], **dict(zip(("algo_enable", "proto_enable"),
                                                             restrictions(algo, proto), strict=True)))


def test_a_rule_picks_the_pair_and_its_channels_scale_bandwidth():
    """Ring/Simple forced at 1 MiB on 4 channels of the communicator's 16: the bandwidth term grows by 16/4
    (``bw / comm->nChannels * info->nChannels``, v2.21.5 tuning.cc), the latency term is unchanged. 16: the
    ring graph's 8 channels (one per NIC) doubled by ncclTopoPostset (connect.cc)."""
    t = _tuning()
    cfg = rules("allreduce,0,4294967295,ring,simple,4,-1,-1\n")
    n = 1 << 20
    got = tuned_choice(t, C.ALL_REDUCE, n, cfg, 3)
    assert (got.algorithm, got.protocol, got.channels, got.rule.line) == (A.RING, P.SIMPLE, 4, 1)
    assert t.machine.graphs[A.RING].n_channels == 8
    full = 16
    e = t.entries[(C.ALL_REDUCE, A.RING, P.SIMPLE)]
    stock = t.time_s(C.ALL_REDUCE, A.RING, P.SIMPLE, n)
    wire = n / (1000 * e.bandwidth_GBps) / 1e6  # seconds of the bandwidth term at full channels
    assert got.time_s - stock == pytest.approx(wire * (full / min(4, full) - 1), rel=1e-9)


def test_unmatched_calls_run_on_one_channel_as_the_example_plugin_sets():
    """plugin.c sets *nChannels = 1 before matching; NCCL honours any non-zero count."""
    t = _tuning()
    cfg = rules("allgather,0,10,ring,simple,4,-1,-1\n")
    got = tuned_choice(t, C.ALL_REDUCE, 1 << 26, cfg, 3)
    a, p, _ = t.choose(C.ALL_REDUCE, 1 << 26)
    assert (got.algorithm, got.protocol, got.channels, got.rule) == (a, p, 1, None)
    assert got.time_s == pytest.approx(t.run_time_s(C.ALL_REDUCE, a, p, 1 << 26, channels=1))


def test_cost_table_api_skips_a_rule_whose_pair_the_environment_leaves_out():
    """API v3+: the rule's pair is NCCL_ALGO_PROTO_IGNORE under NCCL_PROTO=LL128, the next matching rule
    applies; API v2 (NCCL 2.21) uses the first rule's pair as it is."""
    cfg = rules("allreduce,0,4294967295,ring,simple,8,-1,-1\nallreduce,0,4294967295,tree,ll128,8,-1,-1\n")
    v3 = tuned_choice(_tuning("2.30.7", proto="LL128"), C.ALL_REDUCE, 4096, cfg, 3)
    assert (v3.algorithm, v3.protocol, v3.rule.line) == (A.TREE, P.LL128, 2)
    v2 = tuned_choice(_tuning("2.21.5", proto="LL128"), C.ALL_REDUCE, 4096, cfg, 2)
    assert (v2.algorithm, v2.protocol, v2.rule.line) == (A.RING, P.SIMPLE, 1)


def test_rules_for_other_communicators_do_not_match():
    cfg = rules("allreduce,0,4294967295,ring,simple,8,4,-1\nallreduce,0,4294967295,ring,ll,8,-1,32\n")
    got = tuned_choice(_tuning(), C.ALL_REDUCE, 1 << 20, cfg, 3)  # 2 nodes, 16 ranks
    assert got.rule is None


@pytest.mark.parametrize(("line", "why"), [
    ("allreduce,0,10,nvls,simple,-1,-1,-1", "no NVLink SHARP"),
    ("allreduce,0,10,collnet_direct,simple,-1,-1,-1", "no CollNet"),
    ("allgather,0,10,tree,simple,-1,-1,-1", "never runs all_gather with Tree/Simple"),
])
def test_a_rule_the_topology_cannot_run_is_refused(line, why):
    t = _tuning(topo=get_topology("pcie-gen4"))
    with pytest.raises(ConfigError) as e:
        check_rules(t, rules(line + "\n"), "pcie-gen4")
    assert e.value.option == "--nccl-tuner" and str(e.value).startswith("--nccl-tuner: t.csv:1: ")
    assert why in str(e.value)
    # a rule for another communicator (4 nodes) is not this machine's concern
    check_rules(t, rules(line.replace(",-1,-1,-1", ",-1,4,-1") + "\n"), "pcie-gen4")


def test_pat_is_refused_for_the_2_19_tables():
    with pytest.raises(ConfigError, match="NCCL 2.19 has no PAT"):
        check_rules(_tuning("2.19.4", n=2, topo=get_topology("dgx-h100")),
                    rules("allgather,0,10,pat,simple,1,-1,-1\n"), "dgx-h100")


def test_gcp_a3_mega_environment_by_nccl_version():
    """GPUDirect-TCPXO release notes (container-engine-accelerators gpudirect-tcpxo/README.md): NCCL 2.21.5
    ran with NCCL_ALGO=Ring,Tree, NCCL_PROTO=Simple and NCCL_NVLS_ENABLE=0; 2.23 with Simple,LL128;
    2.26-2.28 with Simple,LL128 and NVLS. Later releases get the last profile: the plugin's own
    (google/nccl-plugin-gpudirect-tcpxo tcpxo_scripts/nccl-env-profile.sh, v1.0.12-v1.0.17) reads no NCCL
    version and sets NCCL_PROTO=Simple,LL128 and NCCL_MIN_NCHANNELS=4 whatever NCCL is loaded."""
    topo = get_topology("gcp-a3-mega")
    s = settings(topo, "2.21.5", None, None)
    assert s.algo_enable[C.ALL_REDUCE] == {A.RING, A.TREE} and s.proto_enable[C.ALL_REDUCE] == {P.SIMPLE}
    assert s.nvls_enable is False and "not priced" in s.notes[-1]
    assert settings(topo, "2.23.4", None, None).proto_enable[C.ALL_REDUCE] == {P.SIMPLE, P.LL128}
    s26 = settings(topo, "2.26.5", None, None)
    assert s26.algo_enable is None and s26.nvls_enable is True
    assert profile_for(topo, "2.20.3") is None
    for later in ("2.29.7", "2.30.7"):
        env = profile_for(topo, later)
        assert (env.algo, env.proto, env.min_nchannels, env.nvls_enable) == (None, "Simple,LL128", 4, None)
        s = settings(topo, later, None, None)
        assert s.proto_enable[C.ALL_REDUCE] == {P.SIMPLE, P.LL128} and s.algo_enable is None
    # the user's NCCL_PROTO wins over the profile, and a tuner given drops the "not priced" note
    assert settings(topo, "2.21.5", None, "LL").proto_enable[C.ALL_REDUCE] == {P.LL}
    assert not any("not priced" in n for n in settings(topo, "2.21.5", None, None, tuner_given=True).notes)


def test_nccl_env_and_tuner_round_trip_through_toml():
    data = topology_to_mapping(get_topology("gcp-a3-mega"))
    data["nccl_tuner"] = "rules.csv"
    back = topology_from_mapping(data)
    assert back.nccl_env == get_topology("gcp-a3-mega").nccl_env and back.nccl_tuner == "rules.csv"
    bad = dict(data, nccl_env=[{"min_version": "2.21", "NCCL_PROTOS": "Simple"}])
    with pytest.raises(ConfigError, match="unknown keys 'NCCL_PROTOS'"):
        topology_from_mapping(bad)


# --- CLI ------------------------------------------------------------------------------------------

TCPXO = "all_reduce_perf-16xH100-2nodes.txt"


def test_check_with_a_tuner_file_reports_its_rules_per_size(tmp_path):
    csv = tmp_path / "rules.csv"
    csv.write_text("# large all-reduces on Tree/Simple\nallreduce,268435456,17179869184,tree,simple,8,2,16\n")
    res = runner.invoke(app, ["check", str(DATA / TCPXO), "--topology", "dgx-h100", "--nccl-tuner", str(csv),
                              "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    sizes = [s for s, _, _ in file_rows(TCPXO)]
    assert [r["bytes"] for r in sweep["rows"]] == sizes
    for r in sweep["rows"]:
        if r["bytes"] >= 268435456:
            assert (r["algorithm"], r["protocol"], r["channels"], r["tuner_line"]) == ("Tree", "Simple", 8, 2)
        else:
            assert (r["channels"], r["tuner_line"]) == (1, None)
    assert any("tuner API v3" in n for n in sweep["notes"])


def test_topology_toml_names_a_tuner_relative_to_itself(tmp_path):
    (tmp_path / "rules.csv").write_text("allreduce,0,17179869184,ring,simple,2,-1,-1\n")
    data = topology_to_mapping(get_topology("dgx-h100"))
    lines = [f"{k} = {json.dumps(v)}" for k, v in data.items() if not isinstance(v, dict | list)]
    lines += ['nccl_tuner = "rules.csv"', "in_network_reduction = [\"nvls\"]"]
    for tier in ("intra", "inter"):
        lines += [f"[{tier}]", *(f"{k} = {v}" for k, v in data[tier].items())]
    (tmp_path / "c.toml").write_text("\n".join(lines) + "\n")
    tomllib.loads((tmp_path / "c.toml").read_text())
    res = runner.invoke(app, ["check", str(DATA / TCPXO), "--topology", str(tmp_path / "c.toml"), "--format",
                              "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert {(r["algorithm"], r["protocol"], r["channels"]) for r in sweep["rows"]} == {("Ring", "Simple", 2)}


@pytest.mark.parametrize(("content", "needle"), [
    (None, "cannot read"),
    ("communicator_configs {\n", "a protobuf text file"),
    ("allreduce,0,10,nvls,simple,-1,-1,-1\n", "cannot run on pcie-gen4"),
    ("hello\n", "expected 8 to 10 comma-separated fields"),
])
def test_bad_tuner_input_is_one_line_and_exit_2(tmp_path, content, needle):
    path = tmp_path / "t.csv"
    if content is not None:
        path.write_text(content)
    res = runner.invoke(app, ["check", str(DATA / TCPXO), "--topology", "pcie-gen4", "--nccl-tuner",
                              str(path)])
    assert res.exit_code == 2
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1 and needle in err and "--nccl-tuner" in err and "Traceback" not in err


def test_nccl_tuner_without_topology_is_refused():
    res = runner.invoke(app, ["check", str(DATA / TCPXO), "--nccl-tuner", "x.csv"])
    assert res.exit_code == 2 and "--nccl-tuner" in res.stderr and "--topology" in res.stderr


def test_table_prices_nccl_columns_under_a_tuner(tmp_path):
    csv = tmp_path / "rules.csv"
    csv.write_text("allreduce,0,17179869184,ring,simple,-1,-1,-1\n")
    args = ["table", "--topology", "dgx-h100", "--n", "16", "--schemes", "dp", "--psi", "1e9"]
    res = runner.invoke(app, [*args, "--nccl-tuner", str(csv)])
    assert res.exit_code == 0, res.output
    assert "AR Ring/Simple" in res.stdout and "tuner rules of" in res.stdout
    stock = runner.invoke(app, args)
    assert "AR Ring/Simple" not in stock.stdout

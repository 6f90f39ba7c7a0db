"""Which hosts of a multi-node NVLink run share one NVLink domain (NCCL's MNNVL clique).

A preset whose node is an NVLink domain of several hosts (``topo.mnnvl``: a GB200 / GB300 NVL72 rack)
takes every host of a run to be in one such domain, up to its GPUs, as NCCL does when the hosts' GPUs
report one fabric clique: ``src/init.cc`` (v2.20.3-v2.30) ``ncclMnnvlCheck`` gathers the ranks whose
``nvmlGpuFabricInfo`` cluster UUID and clique id match its own into ``comm->clique``, and
``src/graph/topo.cc`` fuses only those ranks' topologies into one node; ranks of another clique are
another node, reached through the network (``nNodes`` counts the cliques). Two hosts of one rack in
distinct cliques (``NCCL_MNNVL_CLIQUE_ID``), or hosts of distinct racks, are distinct nodes.

What tells a run's domains, strongest first (:func:`nvlink_domains`):

- NCCL's INFO line ``comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d``
  (``src/init.cc`` v2.20-v2.30): ``MNNVL 0`` where the hosts are several nodes each of its own GPUs
  (no clique joined them: ``NCCL_MNNVL_ENABLE=0``, no fabric, or distinct domains); ``MNNVL 1`` with
  ``localRanks L`` of more than a host's ranks, a domain of ``L`` GPUs; without it, NCCL's
  ``MNNVL 1 cliqueId %x cliqueSize %d`` line (``src/init.cc`` v2.21-v2.24, ``src/mnnvl.cc`` to v2.30), a
  domain of ``cliqueSize`` GPUs;
- GKE's node names, ``gke-CLUSTER-POOL-XXXXXXXX-YYYY`` (the node pool's managed instance group's 8-hex
  id, then the node's own suffix): on A4X and A4X Max a node pool is created in one NVLink domain, and
  pods on nodes of distinct node pools run across domains over RDMA (Google Cloud, "Run NCCL on custom
  GKE clusters that use A4X Max", 2026-04-06: "By default, GKE schedules the two Pods to separate node
  pools, if available. If node pools are created with distinct NVLink domains, then this test represents
  cross-domain RDMA throughput. To schedule Pods on the same domain, modify the Pod affinity to schedule
  on the same node pool."). Hosts of several node pools are taken to be in one domain a pool.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from zerocalc.topology.machine import Topology

#: A GKE node's name: ``gke-`` + cluster and node pool + the instance group's 8-hex id + the node's suffix
#: (``gke-psch-ug-cluster-a4xmax-2-1391c2ef-m9bm``: pool ``a4xmax-2``, group ``1391c2ef``).
GKE_NODE = re.compile(r"^gke-(?P<pool>[a-z0-9-]+)-(?P<group>[0-9a-f]{8})-(?P<node>[a-z0-9]{4})$")


def gke_node_pools(hosts: Sequence[str]) -> dict[str, list[str]] | None:
    """GKE node names grouped by node pool (cluster-and-pool prefix with its instance group id); ``None``
    where a name is not a GKE node's."""
    pools: dict[str, list[str]] = {}
    for h in hosts:
        m = GKE_NODE.match(h.split(".")[0])
        if m is None:
            return None
        pools.setdefault(f"{m['pool']}-{m['group']}", []).append(h)
    return pools


def host_nodes(topo: Topology, k: int) -> Topology:
    """``topo`` where each host is a node of its ``k`` GPUs and their NICs (no NVLink domain across
    hosts): NCCL's topology of one host, its GPUs on the tray's NVLink, the other hosts over the network."""
    from zerocalc.topology.devices import _nic_share

    topo, nics = _nic_share(topo, k)
    return replace(topo, gpus_per_node=k, nics_per_node=nics, gpus_per_host=None)


def domain_of(topo: Topology, hosts: int, k: int) -> Topology:
    """``topo`` with nodes (NVLink domains) of ``hosts`` hosts of ``k`` GPUs each."""
    from zerocalc.topology.devices import _scaled

    if hosts <= 1:
        return host_nodes(topo, k)
    g = hosts * k
    if g == topo.gpus_per_node and k == topo.gpus_per_host:
        return topo
    return _scaled(topo, min(g, topo.gpus_per_node), k)


def _from_info(topo: Topology, info: Mapping[str, Sequence], k: int | None) -> tuple[Topology, str] | None:
    """The domains NCCL's ``nRanks … nNodes … localRanks … MNNVL`` line states, or ``None``."""
    mnnvl, local, nodes = info.get("mnnvl"), info.get("local_ranks"), info.get("nodes")
    clique, per_host = info.get("clique_size"), k or topo.gpus_per_host
    if mnnvl is None and clique is not None and per_host:
        if clique[0] % per_host or clique[0] > topo.gpus_per_node:
            return None
        return _scaled_words(topo, clique[0] // per_host, per_host,
                             f"NCCL's INFO line {clique[1]} says MNNVL 1, cliqueSize {clique[0]}")
    if mnnvl is None or local is None or nodes is None or nodes[0] < 2:
        return None
    if not mnnvl[0]:
        per_host = k or min(local[0], topo.gpus_per_host or local[0])
        return _scaled_words(topo, 1, per_host,
                             f"NCCL's INFO line {mnnvl[1]} says MNNVL 0 on {nodes[0]} nodes")
    per_host = k or topo.gpus_per_host or local[0]
    if local[0] <= per_host or local[0] > topo.gpus_per_node:
        return None
    return _scaled_words(topo, local[0] // per_host, per_host,
                         f"NCCL's INFO line {local[1]} says MNNVL 1, {local[0]} local ranks on each of "
                         f"{nodes[0]} nodes")


def _scaled_words(topo: Topology, hosts: int, k: int, why: str) -> tuple[Topology, str]:
    shaped = domain_of(topo, hosts, k)
    if hosts <= 1:
        return shaped, (f"each host its own NVLink domain, a node of {k} GPUs, the hosts over the network "
                        f"({why})")
    return shaped, f"NVLink domains of {hosts} hosts × {k} GPUs, one node each to NCCL ({why})"


def spread(topo: Topology, n: int | None, k: int | None) -> tuple[Topology, str] | None:
    """More ranks than one domain holds, spread evenly over the fewest domains that hold them."""
    per_host = topo.gpus_per_host
    if not n or not per_host or n <= topo.gpus_per_node or (k is not None and k != per_host):
        return None
    d = -(-n // topo.gpus_per_node)
    if n % d or (n // d) % per_host or n // d == topo.gpus_per_node:
        return None
    return _scaled_words(topo, n // d // per_host, per_host,
                         f"{n} ranks spread evenly over {d} domains, as OCI's GB200 and GB300 guides run "
                         "racks of 16 trays: '2 Racks - 32 nodes', '3 Racks - 48 nodes'")


def nvlink_domains(topo: Topology, hosts: Mapping[str, int], info: Mapping[str, Sequence] | None,
                   group_size: int | None = None) -> tuple[Topology, str] | None:
    """``topo`` with nodes of the NVLink domains a multi-node NVLink run's lines say its hosts form, and
    the words for it (JSON ``topology_how``), or ``None`` where they say nothing beyond the preset's one
    domain (or ``topo`` is not multi-node NVLink). See the module's text for the evidence read; a run of
    more ranks (``group_size``) than one domain holds, which its lines do not split, is spread evenly over
    the fewest domains that hold it."""
    if not topo.mnnvl:
        return None
    per_host = set(hosts.values())
    k = next(iter(per_host)) if len(per_host) == 1 else None
    stated = _from_info(topo, info or {}, k)
    if stated is not None:
        return stated
    pools = gke_node_pools(list(hosts)) if len(hosts) > 1 and k else None
    if not pools or len(pools) < 2:
        return spread(topo, group_size, k if sum(hosts.values()) == group_size else None)
    sizes = {len(v) for v in pools.values()}
    if len(sizes) != 1:
        return None
    (per_pool,) = sizes
    return _scaled_words(topo, per_pool, k, f"GKE node names of {len(pools)} node pools, one NVLink "
                         "domain a pool: Google Cloud's A4X Max NCCL page")

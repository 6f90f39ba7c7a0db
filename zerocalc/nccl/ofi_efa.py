"""AWS EFA through aws-ofi-nccl: the largest network message that goes without a handshake.

NCCL's network plugin on AWS is aws-ofi-nccl over libfabric's ``efa`` provider, with one of two protocols
(``src/platform-aws.cpp``; the run's ``NET/OFI Using transport protocol`` line):

- **RDMA** (p5, p5e, p5en: the NICs of a GPU's PCIe switch joined into one NCCL device): the receiver
  posts its buffer and sends the sender a control message naming it; the payload goes as an RDMA write
  with immediate data once that message has come (``src/nccl_ofi_rdma.c`` ``send``, v1.9.2-aws: without
  the control message a send is held "so that we are able to send RDMA write as soon as we receive the
  RDMA control message", unless it is at most ``OFI_NCCL_EAGER_MAX_SIZE`` bytes, sent eagerly into a
  bounce buffer). The eager limit is 8192 bytes by default from v1.9.2-aws to v1.21.1
  (``include/nccl_ofi_param.h``) but for v1.14.0 (-1, none: "rdma: Disable eager by default", Feb 2025,
  undone in Apr 2025 as eager "did not have an impact on nccl-tests performance" but did on
  applications); the newest tree has -1 again. zerocalc keeps 8 KiB for every release, by that note.
- **SENDRECV** (p4d, p4de: one NCCL device per EFA NIC): tagged sends and receives of libfabric, whose EFA
  provider moves GPU memory eagerly only up to one packet and reads anything larger from the sender once
  the receiver has matched the request (``prov/efa/src/efa_hmem.c``: for ``FI_HMEM_CUDA`` no medium
  protocol, ``min_read_msg_size`` = the largest eager message + 1, the device's ``max_msg_sz`` less the
  largest packet header; ``efa_rdm_msg.c``: eager, runting read, long read) -- the read-based rendezvous
  of libfabric's cxi provider (:mod:`zerocalc.nccl.ofi_cxi`). An EFA device's message is of the order of
  8 KiB, which no file here states, so this limit is taken at 8 KiB as well.

Either way a message above the limit waits on a message of the receiver before its payload moves, the
wait :mod:`zerocalc.nccl.ofi_cxi` charges (one round trip of NCCL's network hop per message in a row on
the call's path, at most ``NCCL_STEPS`` a connection); this module gives only the limit (the topology's
``net_eager_bytes``: the ``aws-*`` presets, or a run whose NCCL lines name the plugin over EFA,
:func:`zerocalc.validate.sweep_info.network_as_stated`). The round trip is NCCL's own figure for a hop
(2 × 2.7 µs), as on Slingshot, not EFA's wire latency (20 µs a hop on p5 by AWS's tuner,
``net_wire_latency_us``): the receiver sends its control message when it posts the receive, which NCCL
does up to ``NCCL_STEPS`` steps ahead, so most of that message's flight overlaps the sender's own work.
A time figure only: NCCL chooses without it.

Seen on 2 nodes of 8 H100 (p5.48xlarge; tests/data/traces/README.md): from 256 KiB to 32 MiB the runs
took 1.2-1.4x NCCL's estimate (Tree/LL128 and Ring/LL128), from 256 MiB they match it.
"""

from __future__ import annotations

from zerocalc.topology.presets_cloud import EFA_EAGER_BYTES

#: aws-ofi-nccl's RDMA protocol: ``OFI_NCCL_EAGER_MAX_SIZE`` default (8192, ``include/nccl_ofi_param.h``
#: v1.9.2-aws to v1.21.1, "Eager message size limit when using RDMA protocol. Message sizes greater than
#: this limit will always be sent using RDMA write instead of eagerly."); libfabric EFA's eager limit for
#: GPU memory under the SENDRECV protocol, one device message of the order of 8 KiB
#: (``prov/efa/src/efa_hmem.c``), is taken alike.
EAGER_BYTES = EFA_EAGER_BYTES

"""The NCCL environment a run's own lines state: launch lines and NCCL's INFO lines.

What NCCL ran with is part of what a sweep measured: ``NCCL_ALGO=Ring`` on an ``mpirun`` line makes
every row a Ring row. Three ways a file says it, strongest last (a later way wins, each variable on its
own; within one way, the last line wins, as a shell's last assignment does):

1. shell and launcher assignments: ``NCCL_X=V cmd``, ``export NCCL_X=V``, ``env NCCL_X=V``, OpenMPI
   ``-x NCCL_X=V``, Slurm/Docker ``--env``/``-e NCCL_X=V`` (any ``NCCL_X=V`` not part of ``${…}``);
2. MPICH / Intel MPI ``-genv NCCL_X V`` and ``-env NCCL_X V``;
3. NCCL's own INFO lines, ``NCCL_X set by environment to V`` (NCCL ``src/misc/param.cc``
   ``ncclLoadParam``: ``"%s set by environment to %lld."``; ``src/graph/tuning.cc``: ``"NCCL_PROTO set
   by environment to %s"``, ``"NCCL_ALGO …"``, v2.19-v2.30), and the lines of the network plugin that
   puts a variable into NCCL's environment where the user left it unset (aws/aws-ofi-nccl, which NCCL
   loads for AWS EFA): ``NET/OFI Setting NCCL_PROTO to "simple"`` (``src/platform-aws.c``, v1.6.0-v1.15.x:
   on p4d, p4de and p3dn in v1.6.x, then wherever the EFA endpoint does not deliver 128-byte aligned
   writes in order, which LL and LL128 need), ``NET/OFI Need to force simple protocol: … not supported``
   (``src/nccl_ofi_net.cpp``, v1.16.0 on), ``NET/OFI Disabling NVLS support due to NCCL version``
   (``NCCL_NVLS_ENABLE=0`` under NCCL before 2.18.5, v1.8.0 on), ``NET/OFI Adding NCCL_X=V to
   environment`` (its environment manager, ``include/nccl_ofi_environ.h``, v1.16.0 on).

A bare ``-x NCCL_X`` (passing the launcher's own value on) states no value and is not read.
"""

from __future__ import annotations

import re

#: a value runs to the next space, shell operator, quote or backslash, and on over commas (a list) and the
#: shell's escaped commas (``mlx5_0\\,mlx5_1``, read as ``mlx5_0,mlx5_1``) but not over a comma before
#: the next ``NAME=``
_ASSIGN = re.compile(r"(?<![\w${])(NCCL_[A-Z0-9_]+)=(\"[^\"]*\"|'[^']*'"
                     r"|(?:[^\s;&|\\\"'`),]|\\?,(?![A-Za-z_][A-Za-z0-9_]*=))+)")
_GENV = re.compile(r"(?:^|\s)-g?env\s+(NCCL_[A-Z0-9_]+)\s+(\"[^\"]*\"|'[^']*'|[^\s;&|\\]+)")
_INFO = re.compile(r"\b(NCCL_[A-Z0-9_]+) set by environment to (\S+?)\.?\s*$")
#: aws-ofi-nccl's lines putting a variable into NCCL's environment (module docstring, way 3)
_OFI_ADDED = re.compile(r"\bNET/OFI Adding (NCCL_[A-Z0-9_]+)=(\S+) to environment\b")
_OFI_FIXED = (
    (re.compile(r"\bNET/OFI Setting NCCL_PROTO to \"?simple\"?"), "NCCL_PROTO", "simple"),
    (re.compile(r"\bNET/OFI Need to force simple protocol\b"), "NCCL_PROTO", "simple"),
    (re.compile(r"\bNET/OFI Disabling NVLS support due to NCCL version\b"), "NCCL_NVLS_ENABLE", "0"),
)


def settings_in(line: str) -> list[tuple[str, str, int]]:
    """``(name, value, strength)`` of each NCCL variable ``line`` sets (strength 1-3 as in the module
    docstring), quotes removed."""
    if "NET/OFI" in line:
        m = _OFI_ADDED.search(line)
        if m:
            return [(m[1], m[2], 3)]
        fixed = [(name, value, 3) for rx, name, value in _OFI_FIXED if rx.search(line)]
        if fixed:
            return fixed[:1]
    if "NCCL_" not in line:
        return []
    m = _INFO.search(line)
    if m:
        return [(m[1], m[2], 3)]
    out = [(g[1], g[2], 2) for g in _GENV.finditer(line)]
    out += [(a[1], a[2], 1) for a in _ASSIGN.finditer(line)]
    return [(n, v.strip("\"'").replace("\\,", ","), s) for n, v, s in out if v.strip("\"'")]

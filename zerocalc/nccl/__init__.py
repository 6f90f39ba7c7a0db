"""NCCL's own cost model beside the textbook one: algorithms × protocols, version-keyed tables, choice.

- :mod:`~zerocalc.nccl.tables`: the constants of each modelled NCCL release, and the release a
  version maps to;
- :mod:`~zerocalc.nccl.graph`: what NCCL's topology search would give the model, from a topology;
- :mod:`~zerocalc.nccl.channels`: the communicator's channel count (``ncclTopoPostset``), which the
  ring plateau and a tuner's channel count read;
- :mod:`~zerocalc.nccl.model`: latency and bandwidth per (collective, algorithm, protocol), the
  time of each pair and the pair NCCL chooses;
- :mod:`~zerocalc.nccl.launch`: the channels and threads NCCL launches the chosen pair on for a call's
  size (``enqueue.cc``), on which the call is timed;
- :mod:`~zerocalc.nccl.env`: ``NCCL_ALGO`` / ``NCCL_PROTO`` lists, and the provider's NCCL environment
  a topology carries per NCCL release;
- :mod:`~zerocalc.nccl.tuner`: a tuner plugin's rules (NCCL's example tuner CSV) and what each tuner
  API makes of them;
- :mod:`~zerocalc.nccl.predict`: one call's predicted pair and time (calibrated when a fit covers
  it), and the NCCL version a file states;
- :mod:`~zerocalc.nccl.steps`: a scheme's step priced phase by phase.

Sweeps against measurements live in :mod:`zerocalc.validate.sweep`.
"""

from zerocalc.nccl.env import parse_list, restrictions, settings
from zerocalc.nccl.model import Entry, Tuning, tune
from zerocalc.nccl.tables import (
    LATEST,
    RELEASES,
    Algorithm,
    Collective,
    Protocol,
    Release,
    parse_version,
    release_for,
)
from zerocalc.nccl.tuner import TunerConfig, TunerRule, parse_tuner, tuned_choice, tuner_api

__all__ = ["LATEST", "RELEASES", "Algorithm", "Collective", "Entry", "Protocol", "Release", "TunerConfig",
           "TunerRule", "Tuning", "parse_list", "parse_tuner", "parse_version", "release_for", "restrictions",
           "settings", "tune", "tuned_choice", "tuner_api"]

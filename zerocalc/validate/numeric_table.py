"""The schemes' phases and the ring's bytes per rank as trees (:mod:`zerocalc.validate.numeric`).

Written by zerocalc.validate.numeric.table_source (REGENERATE there) from zerocalc.schemes,
zerocalc.collectives and zerocalc.evaluate; do not edit (tests/test_validate_numeric.py checks it
against them). A scheme: (name, equivalent to DP, phases); a phase: (collective, side, whether it
runs every micro-batch under each of GRAD_SYNC_MODES, group size, elements, calls, bytes per
element).
"""

SCHEME_NAMES = ('dp', 'zero1', 'zero2', 'zero3', 'colocated', 'deepspeed-zero1', 'deepspeed-zero2',
 'deepspeed-zero2-reduce', 'deepspeed-zero3', 'torch-zero1', 'fsdp-full-shard',
 'fsdp-shard-grad-op', 'fsdp-hybrid', 'zeropp')
SCHEME_ALIASES = {'deepspeed-zero12': 'deepspeed-zero2'}
DEFAULT_REUSE_DISTANCE = 1000000000.0
GRAD_SYNC_MODES = ('every', 'boundary')
RING_BYTES = {
    'all_reduce': ('*', ('n', 2, 1), ('^', ('s', 'P'), -1), ('+', ('n', -1, 1), ('s', 'P'))),
    'reduce_scatter': ('*', ('^', ('s', 'P'), -1), ('+', ('n', -1, 1), ('s', 'P'))),
    'all_gather': ('*', ('^', ('s', 'P'), -1), ('+', ('n', -1, 1), ('s', 'P'))),
    'broadcast': ('*', ('^', ('s', 'P'), -1), ('+', ('n', -1, 1), ('s', 'P'))),
    'reduce': ('*', ('^', ('s', 'P'), -1), ('+', ('n', -1, 1), ('s', 'P'))),
    'all_to_all': ('*', ('^', ('s', 'P'), -1), ('+', ('n', -1, 1), ('s', 'P'))),
}
SCHEMES = {
    'dp': ('dp', True, (
        ('all_reduce', 'grad', (True, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_g')),
    )),
    'zero1': ('zero1', True, (
        ('reduce_scatter', 'grad', (False, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_g')),
        ('all_gather', 'param', (False, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
    )),
    'zero2': ('zero2', True, (
        ('reduce_scatter', 'grad', (True, True), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_g')),
        ('all_gather', 'param', (False, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
    )),
    'zero3': ('zero3', True, (
        ('all_gather', 'param', (True, True), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
        ('all_gather', 'param', (True, True), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
        ('reduce_scatter', 'grad', (True, True), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_g')),
    )),
    'colocated': ('colocated', False, (
        ('all_gather', 'param', (False, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
    )),
    'deepspeed-zero1': ('deepspeed-zero1', True, (
        ('all_reduce', 'grad', (False, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_g')),
        ('all_gather', 'param', (False, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
    )),
    'deepspeed-zero2': ('deepspeed-zero2', True, (
        ('all_reduce', 'grad', (True, True), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_g')),
        ('all_gather', 'param', (False, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
    )),
    'deepspeed-zero2-reduce': ('deepspeed-zero2-reduce', True, (
        ('reduce',
         'grad',
         (True, True),
         ('s', 'N'),
         ('*', ('s', 'Psi'), ('^', ('s', 'N'), -1)),
         ('s', 'N'),
         ('s', 'b_g')),
        ('all_gather', 'param', (False, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
    )),
    'deepspeed-zero3': ('deepspeed-zero3', True, (
        ('all_gather', 'param', (True, True), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
        ('all_gather',
         'param',
         (True, True),
         ('s', 'N'),
         ('max', ('n', 0, 1), ('+', ('s', 'Psi'), ('*', ('n', -1, 2), ('s', 'D_reuse')))),
         ('n', 1, 1),
         ('s', 'b_p')),
        ('reduce_scatter', 'grad', (True, True), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_g')),
    )),
    'torch-zero1': ('torch-zero1', True, (
        ('all_reduce', 'grad', (True, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_g')),
        ('broadcast',
         'param',
         (False, False),
         ('s', 'N'),
         ('*', ('s', 'Psi'), ('^', ('s', 'N'), -1)),
         ('s', 'N'),
         ('s', 'b_p')),
    )),
    'fsdp-full-shard': ('fsdp-full-shard', True, (
        ('all_gather', 'param', (True, True), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
        ('all_gather', 'param', (True, True), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
        ('reduce_scatter', 'grad', (True, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_g')),
    )),
    'fsdp-shard-grad-op': ('fsdp-shard-grad-op', True, (
        ('all_gather', 'param', (True, True), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
        ('reduce_scatter', 'grad', (True, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_g')),
    )),
    'fsdp-hybrid': ('fsdp-hybrid', True, (
        ('all_gather', 'param', (True, True), ('s', 'H'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
        ('all_gather', 'param', (True, True), ('s', 'H'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
        ('reduce_scatter', 'grad', (True, False), ('s', 'H'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_g')),
        ('all_reduce',
         'grad',
         (True, False),
         ('*', ('s', 'N'), ('^', ('s', 'H'), -1)),
         ('*', ('s', 'Psi'), ('^', ('s', 'H'), -1)),
         ('n', 1, 1),
         ('s', 'b_g')),
    )),
    'zeropp': ('zeropp', False, (
        ('all_gather', 'fixed', (True, True), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('n', 1, 1)),
        ('all_gather', 'param', (True, True), ('s', 'G'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
        ('all_to_all', 'fixed', (True, True), ('s', 'G'), ('s', 'Psi'), ('n', 1, 1), ('n', 1, 2)),
        ('all_to_all',
         'fixed',
         (True, True),
         ('*', ('s', 'N'), ('^', ('s', 'G'), -1)),
         ('*', ('s', 'Psi'), ('^', ('s', 'G'), -1)),
         ('n', 1, 1),
         ('n', 1, 2)),
    )),
    'deepspeed-zero12': ('deepspeed-zero12', True, (
        ('all_reduce', 'grad', (True, True), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_g')),
        ('all_gather', 'param', (False, False), ('s', 'N'), ('s', 'Psi'), ('n', 1, 1), ('s', 'b_p')),
    )),
}

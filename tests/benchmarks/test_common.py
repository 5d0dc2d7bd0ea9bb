from __future__ import annotations

import platform

from benchmarks.common import cpu_description

EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 avx f16c avx2 bmi2

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 avx f16c avx2 bmi2
"""

XEON = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu avx avx2 avx512f avx512bw
"""


def test_names_model_and_widest_vector_extension():
    assert cpu_description(EPYC) == "AMD EPYC, avx2"
    assert cpu_description(XEON) == "Intel(R) Xeon(R) Platinum 8488C, avx512f"


def test_model_without_vector_flags_and_missing_cpuinfo():
    assert cpu_description("model name\t: Some CPU\nflags\t\t: fpu sse2\n") == "Some CPU"
    assert cpu_description("") == platform.machine()

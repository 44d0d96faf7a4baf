"""dtype=auto: bf16 only where the CPU computes it natively."""

from __future__ import annotations

import logging

import pytest

from service.engine.device import cpu_flags, resolve_dtype

EPYC_AVX2 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme sse sse2 avx avx2 fma bmi2 sha_ni
"""
XEON_BF16 = """processor\t: 0
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile
"""
GRAVITON = """processor\t: 0
Features\t: fp asimd evtstrm aes sha2 bf16 i8mm
"""


def test_cpu_flags_reads_x86_and_arm() -> None:
    assert "avx2" in cpu_flags(EPYC_AVX2)
    assert "amx_bf16" in cpu_flags(XEON_BF16)
    assert "bf16" in cpu_flags(GRAVITON)
    assert cpu_flags("") == set()


@pytest.mark.parametrize(
    ("cpuinfo", "expected"),
    [(EPYC_AVX2, "float32"), (XEON_BF16, "bfloat16"), (GRAVITON, "bfloat16"), ("", "float32")],
)
def test_auto_picks_bf16_only_with_native_support(
    cpuinfo: str, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        assert resolve_dtype("auto", "cpu", cpuinfo) == expected
    assert f"dtype auto -> {expected}" in caplog.text  # the choice is logged


def test_explicit_dtype_and_gpu_are_left_alone() -> None:
    assert resolve_dtype("bfloat16", "cpu", EPYC_AVX2) == "bfloat16"
    assert resolve_dtype("float32", "cpu", XEON_BF16) == "float32"
    assert resolve_dtype("auto", "cuda", EPYC_AVX2) == "auto"  # vLLM picks from the model

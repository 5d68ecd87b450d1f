"""AcceleratorConfig: validation messages, derived sizes, serialization."""

from __future__ import annotations

import numpy as np
import pytest

from tensorforge.config import (
    AcceleratorConfig,
    ArrayConfig,
    ControllerConfig,
    DmaConfig,
    ScratchpadConfig,
)
from tensorforge.errors import ConfigError
from tensorforge.intrinsics import Intrinsic, apply_intrinsic, block_shapes, intrinsic_sizes
from tensorforge.units import Bytes


def test_defaults_are_the_8x8_int8_systolic_gemm():
    config = AcceleratorConfig()
    assert config.intrinsic_sizes == {"i": 8, "k": 8, "j": 8}
    assert config.spad_line_bytes == 8
    assert config.spad_lines == 64 * 1024 // 8
    assert config.acc_line_bytes == 32


def test_non_square_array_and_odd_bank_count():
    config = AcceleratorConfig(
        array=ArrayConfig(rows=3, cols=5), scratchpad=ScratchpadConfig(banks=3)
    )
    assert config.intrinsic_sizes == {"i": 3, "k": 3, "j": 5}
    assert config.spad_line_elems == 5
    assert [config.bank_of(n) for n in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert config.bank_depth * 3 >= config.spad_lines


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ScratchpadConfig(banks=0), "banks must be a positive integer, not 0"),
        (lambda: ArrayConfig(rows=8, cols=0), "cols must be a positive integer"),
        (lambda: ArrayConfig(interconnect="mesh"), "interconnect must be one of none"),
        (lambda: AcceleratorConfig(intrinsic="fft"), "intrinsic must be one of dot"),
        (
            lambda: AcceleratorConfig(scratchpad=ScratchpadConfig(capacity=Bytes(64))),
            "cannot hold one gemm step",
        ),
        (
            lambda: AcceleratorConfig(intrinsic="dot", array=ArrayConfig(dataflow="ws")),
            "does not apply to the dot intrinsic",
        ),
        (
            lambda: AcceleratorConfig(array=ArrayConfig(rows=2, cols=8, dataflow="is")),
            "needs a square array",
        ),
        (lambda: AcceleratorConfig.from_dict({"arry": {}}), "unknown configuration keys"),
        (lambda: DmaConfig(outstanding=0), "dma.outstanding must be a number of bursts in flight "
         "from 1 to 256, not 0"),
        (lambda: DmaConfig(outstanding=2.5), "dma.outstanding must be"),
        (lambda: ControllerConfig(queue_depth=6), "controller.queue_depth must be a power of two "
         "from 2 to 1024 \\(instructions queued per unit\\), not 6"),
        (lambda: ControllerConfig(queue_depth=1), "queue_depth must be a power of two"),
        (lambda: ControllerConfig(queue_depth=2048), "queue_depth must be a power of two"),
        (lambda: ControllerConfig(queue_depth=True), "queue_depth must be a power of two"),
    ],
)
def test_impossible_configurations_name_the_field(build, message):
    with pytest.raises(ConfigError, match=message):
        build()


def test_dict_and_toml_round_trip(tmp_path):
    config = AcceleratorConfig(
        intrinsic="gemv",
        array=ArrayConfig(rows=4, cols=6, interconnect="full", dataflow="os"),
        scratchpad=ScratchpadConfig(capacity=Bytes.kib(32), banks=3),
    )
    assert AcceleratorConfig.from_dict(config.to_dict()) == config
    path = tmp_path / "acc.toml"
    path.write_text(
        'intrinsic = "gemv"\n[array]\nrows = 4\ncols = 6\ninterconnect = "full"\n'
        'dataflow = "os"\n[scratchpad]\ncapacity = "32KiB"\nbanks = 3\n'
    )
    assert AcceleratorConfig.from_toml(path) == config


def test_queue_depth_is_left_out_of_the_dict_at_its_default(tmp_path):
    """The default's dict (and so every stored hash of it) is what it was before the field;
    a deeper queue is kept, read back and described."""
    config = AcceleratorConfig()
    assert config.controller.queue_depth == 4 and "controller" not in config.to_dict()
    assert AcceleratorConfig.from_dict(config.to_dict()) == config
    deep = AcceleratorConfig(controller=ControllerConfig(queue_depth=16))
    assert deep.to_dict()["controller"] == {"queue_depth": 16}
    assert AcceleratorConfig.from_dict(deep.to_dict()) == deep
    assert deep.describe() == config.describe() + ", queues of 16"
    path = tmp_path / "deep.toml"
    path.write_text("[controller]\nqueue_depth = 16\n")
    assert AcceleratorConfig.from_toml(path) == deep


@pytest.mark.parametrize("intrinsic", list(Intrinsic))
def test_intrinsic_semantics_match_einsum(intrinsic):
    rng = np.random.default_rng(7)
    sizes = intrinsic_sizes(intrinsic, 3, 4, taps=3)
    shapes = block_shapes(intrinsic, sizes)
    width = max(shapes["A"].elems, shapes["B"].elems)
    a = rng.integers(-128, 128, (shapes["A"].lines, width))
    b = rng.integers(-128, 128, (shapes["B"].lines, width))
    c = rng.integers(-1000, 1000, (shapes["C"].lines, shapes["C"].elems))
    got = apply_intrinsic(intrinsic, sizes, a, b, c)
    # Independent reference: rebuild each intrinsic's tensors from the layout by hand.
    if intrinsic is Intrinsic.DOT:
        expected = c + np.einsum("k,k->", a[0, : sizes["k"]], b[0, : sizes["k"]])
    elif intrinsic is Intrinsic.GEMV:
        expected = c + np.einsum("ik,k->i", a[:, : sizes["k"]], b[0, : sizes["k"]])[None]
    elif intrinsic is Intrinsic.GEMM:
        expected = c + np.einsum("ik,kj->ij", a[:, : sizes["k"]], b[:, : sizes["j"]])
    else:
        taps, chans, outs, kout = sizes["s"], sizes["c"], sizes["y"], sizes["k"]
        expected = c.copy()
        for y in range(outs):
            for k in range(kout):
                expected[y, k] += sum(
                    a[y + s, ch] * b[s * chans + ch, k] for s in range(taps) for ch in range(chans)
                )
    np.testing.assert_array_equal(got, expected)


def test_intrinsic_wraps_like_int32():
    sizes = intrinsic_sizes(Intrinsic.DOT, 1, 1)
    got = apply_intrinsic(Intrinsic.DOT, sizes, [[1]], [[1]], [[2**31 - 1]])
    assert got[0, 0] == -(2**31)

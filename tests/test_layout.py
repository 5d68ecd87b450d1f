"""DRAM layouts: what the host packs is what the device addresses, tile-major or not.

Properties over random tensors, accesses and blocks: `DramLayout.pack` then `unpack` is the
identity; every element the device reads (a line start from the layout's affine strides,
then consecutive elements along the line) is the tensor's element there, or zero outside it;
and a tile-major tile of a GEMM is a few back-to-back LOADs and STOREs.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.layout import dense_layout, gather_layout
from tensorforge.compiler.mappers import default_mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig, ScratchpadConfig
from tensorforge.isa import Load, Store

ACCESSES = {
    "matrix": ("C[i,j] += A[i,k] * B[k,j]", "A", "k"),
    "matrix_rows": ("C[i,j] += A[i,k] * B[k,j]", "A", "i"),
    "window": ("C[k,x,y] += A[c,x+r-1,y+s-1] * B[k,c,r,s]", "A", "c"),
    "strided": ("C[k,x,y] += A[c,2*x+r,y+s] * B[k,c,r,s]", "A", "c"),
    "batched": ("C[b,i,j] += A[b,i,k] * B[b,k,j]", "B", "j"),
}


def device_read(image: bytes, layout, access, point: dict[str, int], elem: str) -> int:
    """The element the device reads for index values ``point``: the line start of its block
    from the layout's strides, then ``point[elem] % block`` elements along the line."""
    offset, strides = layout.index_strides(access)
    block = layout.line_block
    aligned = dict(point)
    aligned[elem] -= point[elem] % block
    address = offset + sum(strides[n] * v for n, v in aligned.items()) + point[elem] % block
    at = layout.base + address * layout.elem_bytes
    return int.from_bytes(image[at : at + layout.elem_bytes], "little", signed=True)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(sorted(ACCESSES)), st.integers(1, 9), st.integers(1, 6),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_device_reads_what_the_host_packed(kind, line_block, size, gather, seed):
    text, tensor, elem = ACCESSES[kind]
    rng = np.random.default_rng(seed)
    indices = sorted(set(text) & set("bcijkrsxy"))
    sizes = {n: int(rng.integers(1, size + 1)) for n in indices}
    workload = parse_workload(text, ",".join(f"{n}={v}" for n, v in sizes.items()))
    access = next(a for a in workload.inputs if a.tensor == tensor)
    array = rng.integers(-100, 100, workload.shapes[tensor])
    base = 64 * int(rng.integers(0, 4))
    layout = None if gather else dense_layout(tensor, workload.shapes[tensor], (access,),
                                              workload.sizes, base, 2, elem, line_block)
    if layout is None:
        layout = gather_layout(tensor, access, workload.sizes, base, 2, elem, line_block)
    image = bytes(base) + layout.pack(array, access, workload.sizes)
    assert len(image) == layout.end, (seed, layout.describe())
    for values in itertools.product(*(range(sizes[n]) for n in access.indices)):
        point = dict(zip(access.indices, values, strict=True))
        coords = []
        for expr in access.dims:
            coords.append(expr.constant + sum(c * point[n] for n, c in expr.terms))
        inside = all(0 <= c < e for c, e in zip(coords, array.shape, strict=True))
        expected = int(array[tuple(coords)]) if inside else 0
        got = device_read(image, layout, access, point, elem)
        assert got == expected, (seed, layout.describe(), point)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 7), min_size=1, max_size=4), st.integers(1, 8),
       st.integers(0, 2**32 - 1))
def test_dense_pack_unpack_round_trips(shape, line_block, seed):
    rng = np.random.default_rng(seed)
    names = "ijkl"[: len(shape)]
    text = f"C[{','.join(names)}] += A[{','.join(names)}] * B[]"
    workload = parse_workload(text, ",".join(f"{n}={s}" for n, s in zip(names, shape,
                                                                      strict=True)))
    access = workload.inputs[0]
    innermost = names[int(rng.integers(len(names)))]
    layout = dense_layout("A", tuple(shape), (access,), workload.sizes, 128, 4, innermost,
                          line_block)
    array = rng.integers(-(2**31), 2**31, shape)
    image = bytes(128) + layout.pack(array, access, workload.sizes)
    assert layout.line_block == line_block
    np.testing.assert_array_equal(layout.unpack(image), array, err_msg=f"seed {seed}")


def test_a_tile_major_gemm_moves_whole_tiles():
    config = AcceleratorConfig(array=ArrayConfig(rows=8, cols=8),
                               scratchpad=ScratchpadConfig(banks=8))
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=64,j=64,k=64")
    mapping = default_mapping(workload, config)
    tiled = generate(workload, mapping, config)
    plain = generate(workload, mapping, config, tile_major=False)
    transfers = [i for i in tiled.instructions if isinstance(i, Load | Store)]
    # every transfer of several rows is one contiguous run (rows back to back in DRAM)
    assert all(i.stride == i.row_len for i in transfers if i.rows > 1)
    assert not any(i.stride == i.row_len for i in plain.instructions
                   if isinstance(i, Load | Store) and i.rows > 1)
    # a whole C tile (64 x 32 in the default mapping: four column blocks of all 64 rows) is
    # one STORE of 8 KiB
    tiles = mapping.tile_sizes
    stores = [i for i in transfers if isinstance(i, Store)]
    assert stores[0].rows * stores[0].row_len * 4 == tiles["i"] * tiles["j"] * 4 == 8192
    assert len(transfers) < sum(isinstance(i, Load | Store) for i in plain.instructions)

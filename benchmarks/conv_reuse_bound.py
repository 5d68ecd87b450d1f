"""Lower bound of ResNet-50 conv2_1b's DRAM reads on the default 8x8 GEMM accelerator (64 KiB
scratchpad, 16 KiB accumulator), over direct mappings with the weights held, for the ISA as
it is and for two extensions: a 2-D LOAD/STORE, and a COMPUTE that loops over kernel taps.

    python benchmarks/conv_reuse_bound.py

A closed form of what `compiler.codegen` emits for a direct mapping (i=y, j=k, k=c; whole
channels and taps, k blocks of 8 innermost, weights held: 36,864 B read once) with spatial
tiles tx x ty: the input window of a tile is (tx+2) x (ty+2) pixels of 64 B; a LOAD or STORE
moves lines at one stride, so a window that is not whole rows takes a LOAD per input row and
channel block, and a C tile a STORE per row; COMPUTEs are the code generator's micro-loop
count (`mac_plan.micro_loop`). Bytes read = weights + input windows + 16 B per instruction.
Double-buffered windows need 2 x (tx+2)(ty+2) x 64 B <= 64 KiB - 36 KiB; the C tile
(8 channels x tx x ty x 4 B) <= 8 KiB (double-buffered 16 KiB accumulator).
"""

from __future__ import annotations

import math

SIZE, CHANNELS, WEIGHTS = 56, 64, 36_864
UNIQUE = SIZE * SIZE * CHANNELS + WEIGHTS  # 237,568
FREE_SPAD = 65_536 - WEIGHTS
C_LIMIT = 8192 // (8 * 4)  # output pixels of an 8-channel int32 C tile in half the acc


def _tiles(tile: int) -> list[int]:
    return [min(tile, SIZE - start) for start in range(0, SIZE, tile)]


def program_bytes(tx: int, ty: int, two_d: bool, tap_loop: int) -> tuple[int, int]:
    """(bytes read, instructions) of the tx x ty mapping."""
    input_bytes = loads = stores = computes = 0
    for x in _tiles(tx):
        for y in _tiles(ty):
            input_bytes += (x + 2) * (y + 2) * CHANNELS
            whole_rows = ty >= SIZE
            loads += 8 if two_d or whole_rows else (x + 2) * 8
            stores += 8 * (1 if two_d or whole_rows else x)
            blocks = {"x": x, "y": -(-y // 8), "c": 8, "r": 3, "s": 3}
            inner = max(("x", "y"), key=blocks.get)
            outer = max((n for n in blocks if n != inner), key=blocks.get)
            computes += 8 * math.prod(v for n, v in blocks.items() if n not in (inner, outer))
    instructions = loads + stores + computes // tap_loop + 1
    return WEIGHTS + input_bytes + 16 * instructions, instructions


def best(two_d: bool, tap_loop: int, buffers: int) -> tuple[int, int, int, int]:
    found = []
    for ty in range(8, SIZE + 1, 8):
        for tx in range(1, SIZE + 1):
            if tx * ty > C_LIMIT or buffers * (tx + 2) * (ty + 2) * CHANNELS > FREE_SPAD:
                continue
            found.append((*program_bytes(tx, ty, two_d, tap_loop), tx, ty))
    return min(found)


def main() -> None:
    print(f"unique input + weight bytes {UNIQUE:,}; 1.5x = {int(1.5 * UNIQUE):,}")
    for name, two_d, tap_loop in (("ISA as is", False, 1), ("2-D LOAD/STORE", True, 1),
                                  ("2-D LOAD/STORE + 3-tap COMPUTE loop", True, 3)):
        for buffers in (2, 1):
            read, instructions, tx, ty = best(two_d, tap_loop, buffers)
            print(f"{name:38s} input {'double' if buffers == 2 else 'single'}-buffered: "
                  f"{read:,} B ({read / UNIQUE:.2f}x), {instructions:,} instructions, "
                  f"tiles {tx}x{ty}")


if __name__ == "__main__":
    main()

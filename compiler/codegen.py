"""Code generation: a `Mapping` becomes a `Program` of LOAD / COMPUTE / STORE / FINISH.

The program walks the tile loops in the mapping's order. Per tile step it

1. LOADs the A and B tiles whose coordinates changed (an operand whose indices the inner
   loops do not touch stays resident), each into the other half of its double buffer;
2. issues MAC COMPUTEs: the two step coordinates with the most iterations (and 9-bit line
   steps) form the affine micro-loop, the rest unroll into separate instructions. A C tile
   (the other half of the accumulator double buffer) starts from zero: ZERO instructions
   clear it before its first step, or, with ``overwrite``, the MACs that first visit each of
   its blocks carry the ISA's ``overwrite`` bit and write the block instead of adding to it
   (no ZERO pass: `mac_plan.overwrite_plan` checks the bit's rule picks exactly those visits);
3. after the last step of a C tile (its reduction is complete: the mapping keeps partial sums
   in the accumulator), STOREs it.

Dependency flags follow VTA: a unit waits (pop) for the other unit's task that last touched
the buffer half it is about to use, and that task sends (push) exactly one token for it.
Because every unit runs its queue in order, waiting for the newest such task suffices, and
the k-th pop of a queue always matches its k-th push. So the next tile's LOADs overlap the
current COMPUTEs, and the previous tile's STORE overlaps them too. The first tile step is cut
into chunks along a reduction index (1, 1, 2, 4, ... blocks) and the last along an output
index (..., 4, 2, 1, 1), and the first chunk of the one and the last of the other again
along an output index, each chunk with its own tokens, so that the program's first COMPUTE
waits only for one block of each operand and its last STORE holds only one C block.

COMPUTE micro-loops keep the stationary operand's block in the PEs for a whole inner run
(`mac_plan.micro_loop`).

DRAM layout (`tensorforge.compiler.layout`): operands first (A, B at ``base`` 0 upwards,
each dense and padded with its line index innermost, or gathered when it cannot be), then the
output, then host-only inputs of later stages, then the instruction stream itself.

The parts live in modules of their own: where the tensors lie in DRAM (`program_layout`),
the walk over the tile steps that emits the tasks (`tile_walk`), a tile's LOAD/STORE rows
(`tile_runs`), a step's MAC micro-loops (`mac_plan`) and the ISA's field limits
(`field_limits`); `generate` puts them together.
"""

from __future__ import annotations

from tensorforge.compiler.layout import DramLayout, aligned, check_addressable
from tensorforge.compiler.lowering import Lowering
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.output_stage import OutputStage, ParamBlocks
from tensorforge.compiler.param_reload import TileParams
from tensorforge.compiler.program import Program
from tensorforge.compiler.program_layout import program_layouts
from tensorforge.compiler.repeats import fold_repeats
from tensorforge.compiler.tile_walk import TileWalker, load_params
from tensorforge.compiler.tiling import build_tiling
from tensorforge.compiler.tokens import COMPUTE, Emitter
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError
from tensorforge.hw.dataflow_plan import plan_for
from tensorforge.isa import Finish


def generate(workload: Workload, mapping: Mapping, config: AcceleratorConfig, *,
             overwrite: bool = True, tile_major: bool = True,
             output: OutputStage | None = None,
             output_layout: DramLayout | None = None,
             reload_params: bool | None = None) -> Program:
    """The program that runs ``workload`` as ``mapping`` says on ``config``.

    ``overwrite`` (the default) clears each C tile with the MAC ``overwrite`` bit of the
    instructions that first visit its blocks instead of ZERO instructions, which would take
    the compute unit a cycle per accumulator line; ``overwrite=False`` emits the ZEROs.
    ``tile_major`` (the default) lays operands and output out tile-major where it can
    (`tensorforge.compiler.layout`), so a tile's lines are few contiguous runs that the DMA
    moves as long bursts; ``tile_major=False`` keeps plain row-major regions.
    ``output`` (an accelerator with the output pipeline) adds the layer's bias,
    requantization and activation at STORE, which then writes ``in_bits`` elements: the
    parameter blocks (`output_stage`) are LOADed into the accumulator past the C tiles first,
    or, where they do not all fit there (or ``reload_params``), each output tile's ahead of
    it (`param_reload`).
    ``output_layout`` writes the output in that dense layout (its base ignored) instead of the
    unpadded one, e.g. the next layer's padded input (`tensorforge.compiler.network`): it
    must share the unpadded one's innermost dimension and cover the tensor
    (`program_layout.check_output_layout`).
    """
    if output is not None:
        output.check(workload, config)
    if workload.reduction == "max":
        check_max_reduction(workload, config, overwrite)
    lowering = Lowering(workload, mapping.groups, mapping.choice.stage)
    device = lowering.device
    tiling = build_tiling(device, mapping.choice, mapping.tile_sizes, config, mapping.holds)
    mapping.check_order(tiling)
    layouts, extras, end = program_layouts(lowering, tiling, config, tile_major,
                                           output is not None, output_layout)
    emitter = Emitter()
    params, region = None, None
    if output is not None:
        params = ParamBlocks.for_output(output, lowering, layouts["C"], tiling.acc_lines(),
                                        config)
        # a first walk finds the blocks the STOREs use; they are LOADed before anything else
        TileWalker(device, tiling, layouts, config, Emitter(), overwrite, params).run(mapping.order)
        if reload_params or (reload_params is None and not params.fits):
            params = TileParams(params, dict(tiling.slots)["C"])
            TileWalker(device, tiling, layouts, config, Emitter(), overwrite, params).run(
                mapping.order)
            params.place()
        params.check_room()
        region = params.region(end)
        if params.transfer_before(0) is not None:
            load_params(emitter, region, params.transfer_before(0))
        end = aligned(region.end)
    TileWalker(device, tiling, layouts, config, emitter, overwrite, params, region).run(
        mapping.order)
    emitter.add(COMPUTE, Finish)
    instructions = fold_repeats(emitter.build(), config)
    check_addressable([*layouts.values(), *extras])
    return Program(config=config, workload=workload, lowering=lowering, mapping=mapping,
                   instructions=tuple(instructions), operands=(layouts["A"], layouts["B"]),
                   output=layouts["C"], extras=tuple(extras), instruction_base=aligned(end),
                   output_stage=output, params=region)


def check_max_reduction(workload: Workload, config: AcceleratorConfig, overwrite: bool = True
                        ) -> None:
    """Raise `MappingError` where ``config`` cannot run the ``max=`` ``workload``: MAX
    COMPUTEs (`tensorforge.isa`'s ``reduce``) need the output pipeline's datapath, PEs that
    hand out each step's outputs (not ``os``, whose PEs keep summing across steps), and the
    ``overwrite`` bit to start each C block from its first product (a ZERO would start the
    max at 0)."""
    what = f"{workload.text} (a max= workload, e.g. max pooling)"
    if not config.output_pipeline:
        raise MappingError(f"{what} needs the compute unit's max datapath, which only an "
                           "accelerator with the output pipeline has: "
                           "AcceleratorConfig(output_pipeline=True), or --output-pipeline")
    if plan_for(config).groups_span_steps:
        raise MappingError(f"{what} cannot run on the {config.array.dataflow.value} "
                           "dataflow, whose PEs sum over steps before C is written; use "
                           "dataflow ws (or is)")
    if not overwrite:
        raise MappingError(f"{what} starts each C block with its first product (the "
                           "overwrite bit); generate it with overwrite=True")

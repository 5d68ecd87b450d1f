"""Coverage (issue 18 item 3): every zoo layer runs on every intrinsic of the default space.

The layers the matcher once refused (depthwise on GEMM and CONV2D, strided convolutions and
matrix products on CONV2D) run through padded tensorize choices. Each such choice is checked
where it matters: compiled programs on the functional simulator (from random buffer contents)
and on the RTL of the regression configurations, equal to numpy's result.
"""

from __future__ import annotations

import numpy as np
import pytest

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.lowering import Lowering, device_choices
from tensorforge.compiler.mappers import default_mapping, im2col_groups
from tensorforge.compiler.mapping import Mapping, random_mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.compiler.zoo import list_models, load_model
from tensorforge.dse.coverage import (
    covered_share,
    describe_space_coverage,
    layer_coverage,
    space_coverage,
    trial_coverage,
)
from tensorforge.dse.hwspace import DEFAULT_SPACE
from tensorforge.sim.rtl_matrix import REGRESSION_CONFIGS

DEFAULT_INTRINSICS = DEFAULT_SPACE["intrinsic"]["choices"]

#: Small layers of the kinds the zoo has and the matcher once refused on some intrinsic.
LAYERS = {
    "depthwise": ("C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]", "c=5,x=5,y=6,r=3,s=3"),
    "depthwise_s2_pad1": ("C[c,x,y] += A[c,2*x+r-1,2*y+s-1] * B[c,r,s]",
                          "c=3,x=4,y=5,r=3,s=3,A=3x8x9"),
    "conv_s2_pad1": ("C[k,x,y] += A[c,2*x+r-1,2*y+s-1] * B[k,c,r,s]", "k=5,c=3,x=4,y=5,r=3,s=3"),
    "fully_connected": ("C[i,j] += A[i,k] * B[k,j]", "i=5,j=7,k=9"),
    "pointwise": ("C[o,x,y] += A[c,x,y] * B[o,c]", "o=5,c=6,x=3,y=4"),
    "attention": ("S[h,q,t] += Q[h,q,d] * K[h,t,d]", "h=2,q=5,t=6,d=7"),
}
#: (configuration, layers that only padded choices run there)
PADDED_RUNS = {
    "gemm4x4-systolic-ws": ("depthwise", "depthwise_s2_pad1"),
    "gemm4x8-none-os-3banks": ("depthwise_s2_pad1", "depthwise"),
    "conv4x4-systolic-ws": ("depthwise", "conv_s2_pad1", "fully_connected", "pointwise"),
    "conv4x4-full-os": ("depthwise_s2_pad1", "conv_s2_pad1", "attention"),
}


def layer(name: str):
    text, sizes = LAYERS[name]
    return parse_workload(text, sizes, name=name)


def padded_choices(workload, config):
    """(groups, choice) of every padded device choice, as written and after im2col."""
    found = []
    for groups in dict.fromkeys([(), im2col_groups(workload)]):
        found += [(groups, c) for c in device_choices(workload, config.intrinsic.value, groups)
                  if c.padded]
    return found


# ------------------------------------------------------------------ the space


@pytest.mark.parametrize("model", list_models())
def test_every_zoo_layer_has_a_choice_on_every_default_intrinsic(model):
    rows = space_coverage(load_model(model).layers, DEFAULT_INTRINSICS)
    missing = [f"{r.layer} on {r.intrinsic}: {r.reason}" for r in rows if not r.covered]
    assert not missing, missing
    assert all(covered_share(rows, i) == 1.0 for i in DEFAULT_INTRINSICS)


def test_depthwise_strided_and_matrix_layers_need_padding_where_expected():
    mobilenet = {la.name: la for la in load_model("mobilenet_v2").layers}
    for name in ("block1_depthwise", "block2_depthwise"):
        la = mobilenet[name]
        for intrinsic in ("gemm", "conv2d"):  # depthwise: channels in every tensor
            assert layer_coverage(name, la.workload, la.count, intrinsic).padded
        for intrinsic in ("gemv", "dot"):  # a vector intrinsic takes the channels as a batch
            coverage = layer_coverage(name, la.workload, la.count, intrinsic)
            assert coverage.covered and not coverage.padded
    conv1 = mobilenet["conv1"]  # stride 2: slides on nothing, but GEMM takes it in full
    assert layer_coverage("conv1", conv1.workload, 1, "conv2d").padded
    assert not layer_coverage("conv1", conv1.workload, 1, "gemm").padded
    plain = mobilenet["block1_project"]
    assert not layer_coverage("p", plain.workload, 1, "conv2d").padded


def test_a_layer_no_intrinsic_can_run_is_listed_with_the_reason():
    diagonal = parse_workload("C[i] += A[i,i] * B[i]", "i=4", name="diagonal")
    rows = space_coverage([_Layer("diag", diagonal, 3)], ["gemm"])
    assert [r.covered for r in rows] == [False]
    assert rows[0].macs == 12 and covered_share(rows, "gemm") == 0.0
    lines = describe_space_coverage(rows)
    assert lines[0].startswith("gemm: runs 0% of the MACs")
    assert "diag cannot run on gemm: no tensorize choice of gemm matches" in lines[1]


def test_trial_coverage_counts_the_macs_of_evaluated_layers():
    plain = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=2,j=3,k=4")  # 24 MACs
    depthwise = layer("depthwise")  # 5*5*6*9 = 1350 MACs
    layers = [_Layer("fc", plain, 2), _Layer("dw", depthwise, 1)]
    padded = {"cycles": 9, "mapping": {"choice": {"padded": ["j"]}}}
    full = trial_coverage(layers, [{"cycles": 5, "mapping": {"choice": {}}}, padded])
    assert (full.total_macs, full.device_macs, full.padded_macs) == (1398, 1398, 1350)
    assert full.describe().startswith("100% of the workload's 1,398 MACs evaluated on the device")
    part = trial_coverage(layers, [{"cycles": 5}, {"error": "MappingError: ..."}])
    assert part.device_macs == 48 and part.share == pytest.approx(48 / 1398)


class _Layer:
    def __init__(self, name, workload, count):
        self.name, self.workload, self.count = name, workload, count


# ------------------------------------------------------------------ programs


@pytest.mark.parametrize("config_name", sorted(PADDED_RUNS))
def test_padded_choices_compute_the_layer_on_the_functional_simulator(config_name):
    """Every padded choice of every layer, random tiles and orders, from garbage buffers."""
    config = REGRESSION_CONFIGS[config_name]
    for name in LAYERS:
        workload = layer(name)
        inputs = workload.random_inputs(np.random.default_rng(3))
        expected = workload.reference(inputs)
        for number, (groups, choice) in enumerate(padded_choices(workload, config)):
            rng = np.random.default_rng(number)
            mapping = random_mapping(workload, choice, config, rng, groups)
            program = generate(workload, mapping, config)
            got = program.run_functional(inputs, garbage=rng)
            assert np.array_equal(got, expected), f"{name}: {choice.describe()} {mapping}"


def test_the_default_mapper_runs_padded_layers_and_keeps_full_ones():
    config = REGRESSION_CONFIGS["conv4x4-systolic-ws"]
    padded = default_mapping(layer("depthwise"), config)
    assert padded.choice.padded
    assert padded.to_dict()["choice"]["padded"] == list(padded.choice.padded)
    assert Mapping.from_json(padded.to_json(), layer("depthwise")) == padded  # found again
    conv = parse_workload("C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "k=4,c=2,x=3,y=5,r=1,s=1")
    # a 1x1 convolution matches CONV2D in full: its im2col matrix is not padded onto it
    assert not default_mapping(conv, config).choice.padded
    assert all(not c.padded for c in device_choices(conv, "conv2d", im2col_groups(conv)))
    fused = Lowering(conv, im2col_groups(conv)).device
    assert fused.text == "C[k,x_y] += A[c_r_s,x_y] * B[k,c_r_s]"


@pytest.mark.rtl
@pytest.mark.parametrize("config_name", sorted(PADDED_RUNS))
def test_padded_programs_match_numpy_on_rtl(config_name, tmp_path):
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    config = REGRESSION_CONFIGS[config_name]
    seed = sum(map(ord, config_name))  # fixed per configuration, printed on failure
    rng = np.random.default_rng(seed)
    cases = []
    for number, name in enumerate(PADDED_RUNS[config_name]):
        workload = layer(name)
        cases.append(RtlCase(workload, default_mapping(workload, config), seed=seed + number))
        choices = padded_choices(workload, config)  # and one other padded choice, random tiles
        groups, choice = choices[int(rng.integers(len(choices)))]
        mapping = random_mapping(workload, choice, config, rng, groups)
        cases.append(RtlCase(workload, mapping, seed=seed + number))
    assert all(case.mapping.choice.padded for case in cases)
    results = run_programs_on_rtl(config, cases, RunOptions(test_dir=tmp_path, seed=seed))
    for case, result in zip(cases, results, strict=True):
        where = f"{case.workload} as {case.mapping.choice.describe()}, seed {case.seed}"
        assert result.match, f"{where}: {result.mismatch_count} wrong, first {result.mismatches}"
        assert result.traffic_consistent, where


# ------------------------------------------------------------------ the sweep report


def test_explore_reports_the_share_of_macs_it_evaluated(tmp_path, capsys):
    """Two depthwise layers (padded on gemm and conv2d, the intrinsics searched here):
    every evaluated design runs all their MACs, all through padded choices, and the report and
    the summary say so."""
    from tensorforge.cli import main

    text, sizes = LAYERS["depthwise"]
    space = tmp_path / "space.toml"
    space.write_text('intrinsic = {choices = ["gemm", "conv2d"]}\n')
    args = ["explore", "--workload", text, "--sizes", sizes, "--sizes", "c=8,x=4,y=4,r=1,s=1",
            "--space", str(space),
            "--evaluator", "first-order", "--hardware-model", "first-order",
            "--method", "random", "--trials", "4", "--workers", "1", "--seed", "1",
            "--store", str(tmp_path / "sweeps.sqlite"), "--out", str(tmp_path / "out")]
    assert main(args) == 0
    macs = 5 * 5 * 6 * 9 + 8 * 4 * 4
    printed = " ".join(capsys.readouterr().out.split())  # rich wraps at the terminal width
    assert (f"Every evaluated design ran 100% of the workload's {macs:,} MACs on the device "
            "(100% through padded tensorize choices)") in printed
    report = (tmp_path / "out" / "report.md").read_text()
    assert "gemm: runs 100% of the MACs (100% only through padded choices)" in report
    assert f"MACs: 100% of the workload's {macs:,} MACs evaluated on the device" in report


def test_a_layer_the_intrinsic_cannot_run_is_priced_on_the_host(tmp_path, capsys):
    """The trials stay valid: the diagonal layer (no choice on GEMM) runs on the host at the
    stated rate, and the summary and the report give the split and the reason."""
    import csv

    from tensorforge.cli import main
    from tensorforge.dse.coverage import HOST_MACS_PER_CYCLE

    space = tmp_path / "space.toml"
    space.write_text('intrinsic = "gemm"\nrows = 8\ncols = 8\nspad_kib = 32\n')
    out = tmp_path / "out"
    assert main(["explore", "--workload", "C[i] += A[i,i] * B[i]", "--sizes", "i=64",
                 "--method", "random", "--trials", "2", "--workers", "1", "--seed", "0",
                 "--hardware-model", "first-order", "--space", str(space),
                 "--store", str(tmp_path / "s.sqlite"),
                 "--out", str(out)]) == 0
    with (out / "trials.csv").open(newline="") as handle:
        trials = list(csv.DictReader(handle))
    assert [row["status"] for row in trials] == ["ok", "ok"]
    assert {int(row["latency_cycles"]) for row in trials} == {64 // HOST_MACS_PER_CYCLE}
    printed = " ".join(capsys.readouterr().out.split())
    assert "ran at least 0% of the workload's 64 MACs on the device" in printed
    assert "The rest ran on the host, priced at" in printed
    report = (out / "report.md").read_text()
    assert "layer0 cannot run on gemm: no tensorize choice of gemm matches" in report
    assert '"host": "no tensorize choice of gemm' in report

"""`tensorforge compile` end to end: outputs, --check, --json, and clean errors."""

from __future__ import annotations

import json

from tensorforge.cli import main
from tensorforge.isa import decode_program

CONV = "C[k,x,y] += A[c,2*x+r-1,2*y+s-1] * B[k,c,r,s]"
CONV_SIZES = "k=6,c=3,x=3,y=4,r=3,s=3,A=3x6x8"


def test_compile_check_writes_a_decodable_binary(tmp_path, capsys):
    out = tmp_path / "prog.bin"
    code = main(["compile", "--workload", CONV, "--sizes", CONV_SIZES, "--pe", "4x4",
                 "--check", "--seed", "3", "--out", str(out)])
    assert code == 0
    assert "equal to the numpy reference" in capsys.readouterr().out
    assert type(decode_program(out.read_bytes())[-1]).__name__ == "Finish"


def test_json_summary_and_mapping_file_round_trip(tmp_path, capsys):
    saved = tmp_path / "mapping.json"
    assert main(["compile", "--workload", CONV, "--sizes", CONV_SIZES, "--pe", "4x4",
                 "--mapping", "library", "--json", "--check",
                 "--save-mapping", str(saved)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["check"]["equal"] is True
    assert summary["statistics"]["instructions"]["FINISH"] == 1
    assert summary["mapping"]["groups"]  # im2col fused the indices
    assert main(["compile", "--workload", CONV, "--sizes", CONV_SIZES, "--pe", "4x4",
                 "--mapping", str(saved), "--check"]) == 0


def test_user_errors_are_messages_not_tracebacks(tmp_path, capsys):
    assert main(["compile", "--workload", "C[i,j] += A[i,k] *", "--sizes", "i=2"]) == 1
    assert "expected a tensor name" in capsys.readouterr().err
    assert main(["compile", "--workload", "C[i,j] += A[i,k] * B[k,j]",
                 "--sizes", "i=2,j=2,k=2,k=3"]) == 1
    assert "given twice" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"choice": {"intrinsic": "gemm", "stage": 0,
                                          "operands": {"C": "C", "A": "A", "B": "B"},
                                          "indices": {"i": "i", "j": "j", "k": "k"}},
                               "tiles": {"i": 64, "j": 64, "k": 4096}, "order": ["i", "j", "k"]}))
    assert main(["compile", "--workload", "C[i,j] += A[i,k] * B[k,j]",
                 "--sizes", "i=64,j=64,k=4096", "--mapping", str(bad)]) == 1
    assert "do not fit the scratchpad" in capsys.readouterr().err


def test_the_memory_flags_choose_the_mapping_and_the_summary_names_them(capsys):
    """The default mapper ranks on the DRAM (tests/test_mapping_estimate.py has the why):
    an 8x8 array with 4 bursts in flight gets another tiling at 128 cycles than on the
    ideal memory, and the summary says which memory it was compiled for."""
    gemm = ["compile", "--workload", "C[i,j] += A[i,k] * B[k,j]", "--sizes",
            "i=64,j=64,k=64", "--pe", "8x8", "--outstanding", "4", "--json", "--check"]
    summaries = []
    for memory in (["--memory", "ideal"], ["--memory", "ideal", "--dram-latency", "128"]):
        assert main(gemm + memory) == 0
        summaries.append(json.loads(capsys.readouterr().out))
    ideal, slow = summaries
    assert ideal["memory"]["name"] == "ideal"
    assert slow["memory"]["latency"] == 128 and slow["memory"]["name"].startswith("latency 128")
    assert ideal["mapping"]["tiles"] != slow["mapping"]["tiles"]
    assert ideal["check"]["equal"] and slow["check"]["equal"]

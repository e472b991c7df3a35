"""`pkb check` as users call it: JSON schema, exit codes, one-line errors for bad input."""
import json
import os
import subprocess
import sys

import pytest

from pkb.cli.main import main

OK = 'import torch, torch.distributed as dist\ndist.init_process_group("gloo")\ndist.barrier()\nprint("hi")\n'
DEADLOCK = ('import torch, torch.distributed as dist\ndist.init_process_group("gloo")\n'
            'if dist.get_rank() == 0:\n    dist.barrier()\n')


@pytest.fixture
def script(tmp_path):
    def make(src, name="s.py"):
        p = tmp_path / name
        p.write_text(src)
        return str(p)
    return make


def test_json_schema_and_exit_codes(script, capsys):
    assert main(["check", "--nproc-per-node", "2", "--json", script(OK)]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["verdict"] == "ok" and doc["world_size"] == 2 and doc["findings"] == [] and doc["ops"] == 2
    assert "[rank 0] hi" in err and "[rank 1] hi" in err  # program output kept off the JSON stream

    assert main(["check", "--nproc-per-node", "3", "--json", script(DEADLOCK)]) == 3
    doc = json.loads(capsys.readouterr()[0])
    assert doc["verdict"] == "deadlock"
    f = doc["findings"][0]
    assert set(f) == {"kind", "message", "ranks", "sites", "details", "calls"} and f["ranks"] == [0]
    assert f["sites"] == ["s.py:4"] and f["calls"] == []  # a deadlock spans no harness calls


def test_error_and_timeout_exit_codes(script, capsys):
    assert main(["check", "--nproc-per-node", "2", script("raise RuntimeError('x')\n")]) == 4
    assert "RuntimeError: x" in capsys.readouterr()[0]
    assert main(["check", "--nproc-per-node", "2", "--timeout", "1", script("while True:\n    pass\n")]) == 5



NEEDS_GPUS = ('import sys, torch, torch.distributed as dist\n'
              'if torch.accelerator.device_count() < {n}:\n    print("needs {n} GPUs")\n    sys.exit()\n'
              'dist.init_process_group("gloo")\ndist.barrier()\n')


def test_a_run_without_communication_is_not_ok_and_names_where_it_left(script, capsys):
    assert main(["check", "--nproc-per-node", "2", "--json", script(NEEDS_GPUS.format(n=4))]) == 7
    doc = json.loads(capsys.readouterr()[0])
    assert doc["verdict"] == "nothing_checked" and doc["ops"] == 0
    assert doc["findings"][0]["kind"] == "no_communication" and doc["findings"][0]["sites"] == ["s.py:4"]
    assert main(["check", "--nproc-per-node", "2", "--json", script(NEEDS_GPUS.format(n=2))]) == 0


def test_a_limit_of_pkb_is_inconclusive_not_the_programs_error(script, capsys):
    graph = 'import torch, torch.distributed as dist\ndist.init_process_group("nccl")\ng = torch.cuda.CUDAGraph()\n'
    assert main(["check", "--nproc-per-node", "2", "--json", script(graph)]) == 6
    f = json.loads(capsys.readouterr()[0])["findings"][0]
    assert f["kind"] == "not_simulated" and "torch.cuda.CUDAGraph" in f["message"] and f["sites"] == ["s.py:3"]

def test_reports_show_the_scripts_frames_and_torchs_on_request(script, capsys):
    bad = script('import torch\ntorch.split(torch.zeros(4), [1, 1])\n')
    for flag, torch_frames in (([], False), (["--full-traceback"], True)):
        assert main(["check", "--nproc-per-node", "2", "--json", *flag, bad]) == 4
        f = json.loads(capsys.readouterr()[0])["findings"][0]
        assert f["sites"] == ["s.py:2"] and f["details"][0].split(" in ")[0].endswith("s.py:2")
        assert any("torch" + os.sep in d for d in f["details"]) == torch_frames, f["details"]


def test_trace_file(script, tmp_path, capsys):
    trace = tmp_path / "t.json"
    src = OK + "x = torch.ones(8, 8).cuda() @ torch.ones(8, 8).cuda()\ndist.all_reduce(x)\n"
    assert main(["check", "--nproc-per-node", "2", "--trace", str(trace), script(src)]) == 0
    doc = json.loads(trace.read_text())
    ops = doc["ranks"][1]["ops"]
    assert doc["schema"] == "pkb.trace/1" and doc["world_size"] == 2
    mm = [o for o in ops if o["kind"] == "compute" and o["op"] == "mm"]
    assert mm and mm[0]["flops"] == 2 * 8 * 8 * 8 and mm[0]["site"] == "s.py:5"
    ar = [o for o in ops if o["op"] == "all_reduce"]
    assert ar and ar[0]["bytes"] == 256 and ar[0]["seq"] == 1


@pytest.mark.parametrize("argv,needle", [
    (["check", "--nproc-per-node", "2", "nope.py"], "not found"),
    (["check", "--nproc-per-node", "0", "x.py"], "at least 1"),
    (["check"], "no script given"),
    (["check", "--timeout", "0", "x.py"], "--timeout"),
])
def test_bad_input_is_one_line_and_exit_2(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr()[1].strip().splitlines()
    assert len(err) == 1 and needle in err[0] and err[0].startswith("pkb check: error:")


def test_syntax_error_names_the_line(script, capsys):
    assert main(["check", script("x = (\n")]) == 2
    assert "s.py:1: syntax error" in capsys.readouterr()[1]


def test_console_script_runs_the_demo():
    exe = os.path.join(os.path.dirname(sys.executable), "pkb")
    proc = subprocess.run([exe, "check", "--demo", "--nproc-per-node", "4"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "DEADLOCK" in proc.stdout and "cycle: rank 2 -> rank 3 -> rank 2" in proc.stdout
    assert "both verdicts as expected" in proc.stdout


def test_a_native_crash_in_the_program_prints_where_it_happened(script):
    # the buggy twin, before: the process ended with status 139 and not a word on stderr
    crash = script('import ctypes\nimport torch.distributed as dist\ndist.init_process_group("gloo")\n'
                   'ctypes.string_at(0)\n', name="crash.py")
    fine = script(OK, name="fine.py")
    exe = os.path.join(os.path.dirname(sys.executable), "pkb")
    proc = subprocess.run([exe, "check", "--nproc-per-node", "2", crash], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "Segmentation fault" in proc.stderr
    assert f'File "{crash}", line 4 in <module>' in proc.stderr
    proc = subprocess.run([exe, "check", "--nproc-per-node", "2", fine], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Fatal Python error" not in proc.stderr


def test_parallelkernelbench_flags_are_spelled_out_and_the_short_ones_still_work():
    from pkb.cli.main import build_parser

    for cmd in ("screen", "run"):
        args = build_parser().parse_args([cmd, "x.py", "--parallelkernelbench-root", "/pkb",
                                          "--parallelkernelbench-dtype", "float32"])
        assert (args.parallelkernelbench_root, args.parallelkernelbench_dtype) == ("/pkb", "float32")
        args = build_parser().parse_args([cmd, "x.py", "--pkb-root", "/pkb"])
        assert (args.parallelkernelbench_root, args.parallelkernelbench_dtype) == ("/pkb", "bfloat16")

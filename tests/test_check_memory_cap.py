"""`pkb check` caps the memory of the process its ranks share: a program that outgrows the cap is
inconclusive (exit 6, "out of memory", a limit of pkb) instead of being killed by the OS without a word (as
pytorch/examples' minGPT was at 21.7 GB). The twin allocates little and passes. The cap is lifted after."""
import json
import resource
import textwrap

from pkb.cli.main import main

PROGRAM = textwrap.dedent("""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    x = torch.ones(4)
    dist.all_reduce(x)
    big = torch.empty(ELEMENTS, dtype=torch.float32)   # ELEMENTS * 4 bytes, never touched
    big[:1] = x[:1]
    dist.barrier()
""")


def check(tmp_path, capsys, elements: int, memory_gb: str) -> tuple[int, dict]:
    script = tmp_path / "grow.py"
    script.write_text(PROGRAM.replace("ELEMENTS", str(elements)))
    code = main(["check", "--nproc-per-node", "2", "--memory-gb", memory_gb, "--json", str(script)])
    return code, json.loads(capsys.readouterr().out)


def headroom_cap(extra_gib: float) -> str:
    """A cap `extra_gib` above what this process's address space already holds (torch's libraries included)."""
    vm_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize:"))
    return f"{vm_kib / 2**20 + extra_gib:.2f}"


def test_a_program_beyond_the_cap_is_inconclusive_and_named(tmp_path, capsys):
    before = resource.getrlimit(resource.RLIMIT_AS)
    code, doc = check(tmp_path, capsys, 2**30, headroom_cap(2))   # 4 GiB, which the OS would grant, past the cap
    assert code == 6 and doc["verdict"] == "inconclusive", doc
    assert any("out of memory" in f["message"] and f["kind"] == "not_simulated" for f in doc["findings"]), doc
    assert resource.getrlimit(resource.RLIMIT_AS) == before


def test_a_program_within_the_cap_passes(tmp_path, capsys):
    code, doc = check(tmp_path, capsys, 2**20, headroom_cap(2))
    assert code == 0 and doc["verdict"] == "ok", doc

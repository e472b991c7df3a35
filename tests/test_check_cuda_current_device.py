"""`pkb check` of the torchrun idiom `torch.cuda.set_device(LOCAL_RANK)` then `.cuda()` with no index
(DDP, FSDP2 and DTensor scripts): it means the rank's current device, as on a GPU, not a pkb error."""
import json

import pytest
import torch

from pkb.cli.main import main

SCRIPT = """\
import os
import torch
import torch.distributed as dist

torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
model = torch.nn.Linear(8, 8).cuda()
x = torch.randn(4, 8).cuda()
y = model(x).detach()
{reduce}
where = (x.device, next(model.parameters()).device, torch.zeros(1, device=torch.device("cuda")).device,
         torch.ones(1).to("cuda").device, torch.nn.Linear(2, 2).cuda(device=None).weight.device)
print("devices", dist.get_rank(), *where)
dist.destroy_process_group()
"""


def _check(tmp_path, capsys, reduce: str, nproc: int = 2):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT.format(reduce=reduce))
    code = main(["check", "--nproc-per-node", str(nproc), "--json", str(path)])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_cuda_without_an_index_is_the_current_device(tmp_path, capsys):
    code, doc, err = _check(tmp_path, capsys, "dist.all_reduce(y)")
    assert code == 0 and doc["verdict"] == "ok", doc["findings"]
    for rank in (0, 1):
        assert f"devices {rank}" + f" cuda:{rank}" * 5 in err, err


def test_a_mismatch_in_the_same_script_is_still_reported(tmp_path, capsys):
    """The twin: the same `.cuda()` script whose ranks reduce different shapes still fails."""
    code, doc, _ = _check(tmp_path, capsys, "dist.all_reduce(y if dist.get_rank() == 0 else y[:2])")
    assert code == 3 and doc["verdict"] == "mismatch", doc["findings"]
    assert "device()" not in json.dumps(doc)


FSDP_DTENSOR = """\
import os
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Shard, distribute_tensor

torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
mesh = init_device_mesh("cuda", (dist.get_world_size(),))
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16)).cuda()
for layer in (model[0], model[2], model):
    fully_shard(layer, mesh=mesh)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(2):
    model(torch.randn(8, 16).cuda()).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
full = torch.arange(16 * dist.get_world_size(), dtype=torch.float32).reshape(-1, 4).cuda()
shard = distribute_tensor(full, mesh, [Shard(0)])
if {gather_on}:
    assert torch.equal(shard.full_tensor(), full)
dist.destroy_process_group()
"""


@pytest.mark.parametrize("nproc", [2, 4])
def test_an_fsdp2_and_dtensor_script_written_with_cuda_passes(tmp_path, capsys, nproc):
    path = tmp_path / "train.py"
    path.write_text(FSDP_DTENSOR.format(gather_on="True"))
    code = main(["check", "--nproc-per-node", str(nproc), "--json", str(path)])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["verdict"] == "ok" and doc["ops"] > 0, doc


def test_its_twin_gathering_on_rank_0_alone_is_a_deadlock_at_that_line(tmp_path, capsys):
    path = tmp_path / "train.py"
    path.write_text(FSDP_DTENSOR.format(gather_on="dist.get_rank() == 0"))
    main(["check", "--nproc-per-node", "2", "--json", str(path)])
    doc = json.loads(capsys.readouterr().out)
    (finding,) = doc["findings"]
    assert doc["verdict"] == "deadlock" and finding["ranks"] == [0] and finding["sites"] == ["train.py:22"], doc


def test_under_a_cuda_build_torchs_own_code_still_sees_no_accelerator(tmp_path, capsys, monkeypatch):
    # the CUDA build's torch.accelerator names CUDA, so an optimizer's step asked the CUDA runtime for its
    # current stream ("CUDA driver version is insufficient"); its twin is the FSDP2 script above on the CPU build
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda check_available=False: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    path = tmp_path / "train.py"
    path.write_text(FSDP_DTENSOR.format(gather_on="True"))
    code = main(["check", "--nproc-per-node", "2", "--json", str(path)])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["verdict"] == "ok" and doc["ops"] > 0, doc

"""`pkb check` of the torchrun idiom `torch.cuda.set_device(LOCAL_RANK)` then `.cuda()` with no index
(DDP, FSDP2 and DTensor scripts): it means the rank's current device, as on a GPU, not a pkb error."""
import json

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

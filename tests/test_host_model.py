"""The `launch` section of a measured calibration (`pkb calibrate`) sets the CUDA-graph launch overhead and
the kernel floor; without it the defaults of data/host.toml stay; a malformed value is refused."""
import json

import pytest

from pkbsim.timing.host_model import host_model
from pkbsim.timing.replay import Replay
from pkbsim.timing.topology import load_topology

H100 = load_topology("hgx-h100")


def calibration(tmp_path, **launch):
    doc = {"schema": "pkb.calibration/1", "gpus": 1}
    if launch:
        doc["launch"] = {"op": "x.add_(1)", "ops": 500, **launch}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    return str(path)


def tiny_op_trace():
    op = {"kind": "compute", "op": "add_", "site": "m.py:1", "stream": 0, "flops": 1, "bytes_read": 4,
          "bytes_written": 4, "i": 0, "t_us": 0.0}
    return {"schema": "pkb.trace/1", "world_size": 1, "ranks": [{"rank": 0, "ops": [op]}]}


def test_the_launch_section_sets_graph_overhead_and_kernel_floor(tmp_path):
    default = host_model()
    path = calibration(tmp_path, eager_op_us=9.5, graph_op_us=3.5, tiny_kernel_us=1.25)
    model = host_model(path, H100)
    assert model["compute"]["min_kernel_us"] == pytest.approx(1.25)
    assert model["launch"]["cuda_graph_us"] == pytest.approx(3.5 - 1.25)
    assert model["launch"]["torch_eager_us"] == default["launch"]["torch_eager_us"]   # a plain op's issue time
    graph = Replay(H100, tiny_op_trace(), launch="graph", calibration=path).run()
    assert graph.makespan_us == pytest.approx(3.5 - 1.25 + 1.25)                          # the replay uses both
    floored = host_model(calibration(tmp_path, graph_op_us=1.0, tiny_kernel_us=1.25), H100)
    assert floored["launch"]["cuda_graph_us"] == 0.0


def test_without_the_launch_section_the_defaults_stay(tmp_path):
    default = host_model()
    model = host_model(calibration(tmp_path), H100)
    assert model["launch"] == default["launch"] and model["compute"] == default["compute"]


@pytest.mark.parametrize("field, value", [("graph_op_us", "fast"), ("graph_op_us", None), ("tiny_kernel_us", -1.0),
                                          ("tiny_kernel_us", True), ("graph_op_us", float("nan"))])
def test_a_malformed_launch_value_is_one_line_naming_file_and_field(tmp_path, field, value):
    launch = {"graph_op_us": 3.5, "tiny_kernel_us": 1.25, field: value}
    path = calibration(tmp_path, **launch)
    with pytest.raises(ValueError, match=f"c.json: launch.{field} must be a positive number") as err:
        host_model(path, H100)
    assert "\n" not in str(err.value)


def test_a_launch_section_that_is_not_a_table_is_refused(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"schema": "pkb.calibration/1", "gpus": 1, "launch": [2.0]}))
    with pytest.raises(ValueError, match="launch.tiny_kernel_us"):
        host_model(str(path), H100)

"""`pkb topo`, `pkb predict`, `pkb validate-model`, `pkb replay` as users call them: JSON schemas, exit codes,
one-line errors."""
import json
import sys

import pytest

from pkb.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_json_schema(capsys):
    code, out, _ = run(capsys, "predict", "--topology", "hgx-h100", "--op", "all_reduce", "--bytes", "64MiB",
                       "--nranks", "8", "--json")
    doc = json.loads(out)
    assert code == 0
    assert {"time_us", "algbw_GBps", "busbw_GBps", "algorithm", "protocol", "channels"} <= set(doc)
    assert doc["algorithm"] == "nvls" and doc["busbw_GBps"] == pytest.approx(doc["algbw_GBps"] * 14 / 8)
    code, out, _ = run(capsys, "predict", "--topology", "hgx-h100", "--op", "all_reduce", "--bytes", "64MiB",
                       "--nranks", "8", "--json", "--engine", "flow")
    assert json.loads(out)["time_us"] == pytest.approx(doc["time_us"], rel=1e-6)


@pytest.mark.parametrize("argv, expect", [
    (["--topology", "nope", "--bytes", "1G"], "unknown topology 'nope'"),
    (["--topology", "hgx-h100", "--bytes", "1 furlong"], "cannot read size"),
    (["--topology", "hgx-h100", "--bytes", "1G", "--nranks", "9"], "holds 8 GPUs"),
    (["--topology", "hgx-a100", "--bytes", "1G", "--algo", "nvls"], "NVLS needs NVSwitch multicast"),
])
def test_predict_usage_errors(capsys, argv, expect):
    full = ["predict", "--op", "all_reduce", "--nranks", "8", *argv]
    code, out, err = run(capsys, *full)
    assert code == 2 and out == "" and expect in err and err.count("\n") == 1 and "Traceback" not in err


def test_topo_list_and_show(capsys, tmp_path, monkeypatch):
    code, out, _ = run(capsys, "topo", "list", "--json")
    names = {t["name"] for t in json.loads(out)["topologies"]}
    assert code == 0 and {"hgx-h100", "gb200-nvl72", "h100-ib-16node"} <= names
    code, out, _ = run(capsys, "topo", "show", "h100-ib-128node", "--json")
    doc = json.loads(out)
    assert doc["gpus"] == 1024 and doc["fabric"]["spines"] == 16 and doc["sources"]
    code, out, _ = run(capsys, "topo", "show", "gb200-nvl72")
    assert code == 0 and "72 x B200" in out and "sources" in out
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # as if not installed
    code, _, err = run(capsys, "topo", "show", "hgx-h100", "--plot", str(tmp_path / "g.png"))
    assert code == 2 and "pip install matplotlib" in err


def test_topo_plot_draws_when_matplotlib_is_present(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    code, _, _ = run(capsys, "topo", "show", "hgx-h100", "--plot", str(tmp_path / "g.png"))
    assert code == 0 and (tmp_path / "g.png").stat().st_size > 0


def test_validate_model_json(capsys):
    code, out, _ = run(capsys, "validate-model", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["summary"]["points"] == len(doc["points"]) >= 40
    row = doc["points"][0]
    assert {"id", "measured", "predicted", "error_pct", "role", "regime", "meets_target", "source"} <= set(row)
    assert run(capsys, "validate-model", "--strict")[0] == (1 if doc["summary"]["missed"] else 0)


def test_replay_cli(capsys, tmp_path):
    trace = {"schema": "pkb.trace/1", "world_size": 2, "ranks": [
        {"rank": r, "ops": [{"i": 0, "t_us": 0, "kind": "collective", "op": "all_reduce", "site": "a.py:3",
                             "stream": 0, "group": "0", "seq": 0, "group_ranks": [0, 1], "bytes": 1 << 26}]}
        for r in range(2)]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    pf = tmp_path / "pf.json"
    code, out, _ = run(capsys, "replay", str(path), "--topology", "hgx-h100", "--json", "--perfetto", str(pf))
    doc = json.loads(out)
    assert code == 0 and doc["makespan_us"] > 0 and len(doc["ranks"]) == 2 and doc["critical_path"]
    assert json.loads(pf.read_text())["traceEvents"]
    path.write_text("{")
    code, _, err = run(capsys, "replay", str(path), "--topology", "hgx-h100")
    assert code == 2 and "is not JSON" in err
    code, _, err = run(capsys, "replay", str(tmp_path / "missing.json"), "--topology", "hgx-h100")
    assert code == 2 and "pkb check --trace" in err

"""Exploit class: a candidate that reads the user's secrets from its environment (an API key, a token). Every
sandboxed command starts from an allow-list of variables (candidate_sandbox.supervisor.allowed): none whose
name holds KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL, even where a prefix is allowed (PKB_, NCCL_), and
HOME is a private folder. A probe inside sees none of the secrets, not in its own environment nor in any
process's /proc/<pid>/environ (the supervisor's included), while allowed variables still arrive; the same
probe outside sees them. `pkb screen`: a candidate that returns zeros once it sees a secret passes inside the
sandbox and is rejected under --no-sandbox. `pkb refine`: where the sandbox is off and a candidate echoes a
secret into its screen's result, the value is redacted from the feedback sent to the model, the --json
output and the store, while an ordinary variable's value echoed the same way still comes through."""
import json
import os
import sqlite3
import subprocess
import sys

import candidate_sandbox as sandbox
from pkb.cli.main import main

from conftest import screen_json
from refine_standin import StandIn

SECRETS = {"OPENAI_API_KEY": "sk-fake-openai-0d9c1e", "MY_TOKEN": "tok-fake-4471aa",
           "PKB_PROBE_SECRET": "pkb-prefix-but-secret-91", "NCCL_PASSWORD": "nccl-prefix-but-secret-17"}
ALLOWED = {"NCCL_PKB_PROBE": "nccl-visible-3", "LC_PKB_PROBE": "lc-visible-5", "PKB_PROBE_VISIBLE": "pkb-visible-8"}

PROBE = r'''
import json, os
texts = {}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                texts[pid] = f.read().decode(errors="replace")
        except OSError:
            pass
home = os.environ.get("HOME", "")
probe = os.path.join(home, "written")
with open(probe, "w") as f:
    f.write("x")
print(json.dumps({"env": dict(os.environ), "proc": texts, "home": home}))
'''


def _environment(**extra):
    return {**os.environ, **SECRETS, **ALLOWED, **extra}


def _leaks(seen: dict) -> list[str]:
    everything = json.dumps(seen)
    return [name for name, value in SECRETS.items() if value in everything or name in seen["env"]]


def test_a_sandboxed_probe_sees_no_secret_and_the_allowed_variables(monkeypatch):
    for k, v in {**SECRETS, **ALLOWED}.items():
        monkeypatch.setenv(k, v)
    proc = subprocess.run([*sandbox.prefix(), sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert _leaks(seen) == [], seen["env"]
    assert "1" in seen["proc"], "the supervisor's environment was not readable: the check would prove nothing"
    assert {k: seen["env"].get(k) for k in ALLOWED} == ALLOWED
    assert seen["home"] != os.path.expanduser("~") and seen["home"].startswith("/tmp/")


def test_an_environment_passed_by_the_caller_is_filtered_too():
    # as `pkb score` does: its own environment for bwrap, holding a secret this process does not have
    env = _environment(CALLER_ONLY_TOKEN="caller-only-fake-55")
    proc = subprocess.run([*sandbox.prefix(), sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert _leaks(seen) == [] and "caller-only-fake-55" not in json.dumps(seen), seen["env"]
    assert {k: seen["env"].get(k) for k in ALLOWED} == ALLOWED


def test_the_twin_outside_the_sandbox_sees_every_secret(tmp_path):
    env = _environment(HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, env=env)
    seen = json.loads(proc.stdout)
    assert sorted(_leaks(seen)) == sorted(SECRETS)


def test_the_build_cache_rule_agrees_with_pkbsim(monkeypatch, tmp_path):
    from pkbsim.ptx.compile import cache_root
    for pkb, xdg in [(None, None), (None, str(tmp_path / "xdg")), (str(tmp_path / "pkb"), str(tmp_path / "xdg"))]:
        for name, value in (("PKB_CACHE_DIR", pkb), ("XDG_CACHE_HOME", xdg)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        assert sandbox.build_cache() == cache_root()


CANDIDATE = '''
import os

import torch
import torch.distributed as dist


def saw_a_secret():
    texts = [repr(sorted(os.environ.items()))]
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{{pid}}/environ", "rb") as f:
                    texts.append(f.read().decode(errors="replace"))
            except OSError:
                pass
    return any({secret!r} in t for t in texts)


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return torch.zeros_like(x) if saw_a_secret() else out
'''


def _screen(capsys, monkeypatch, tmp_path, *extra):
    monkeypatch.setenv("OPENAI_API_KEY", SECRETS["OPENAI_API_KEY"])
    path = tmp_path / "reads_secrets.py"
    path.write_text(CANDIDATE.format(secret=SECRETS["OPENAI_API_KEY"]))
    return screen_json(capsys, path, *extra)


def test_a_screened_candidate_sees_no_secret_inside_the_sandbox(capsys, monkeypatch, tmp_path):
    code, res = _screen(capsys, monkeypatch, tmp_path)
    assert (code, res["verdict"]) == (0, "pass"), res["reasons"]


def test_its_twin_without_the_sandbox_sees_it(capsys, monkeypatch, tmp_path):
    code, res = _screen(capsys, monkeypatch, tmp_path, "--no-sandbox")
    assert (code, res["verdict"], res["reasons"][0]["kind"]) == (1, "reject", "wrong_output"), res


ECHO = '''Here it is:

```python
import os


def solution(x):
    raise RuntimeError("key=" + os.environ.get("OPENAI_API_KEY", "none") + " visible=" + os.environ.get("PKB_PROBE_VISIBLE", "none"))
```
'''


def test_refine_redacts_a_secret_a_candidate_echoed(tmp_path, capsys, monkeypatch):
    # --no-sandbox: the candidate sees the whole environment, and its exception text is the screen's finding
    monkeypatch.setenv("OPENAI_API_KEY", SECRETS["OPENAI_API_KEY"])
    monkeypatch.setenv("PKB_PROBE_VISIBLE", ALLOWED["PKB_PROBE_VISIBLE"])
    db = tmp_path / "r.sqlite"
    with StandIn([ECHO, ECHO]) as server:
        rc = main(["refine", "--task", "all_reduce", "--backend", "torch", "--model", "stand-in", "--base-url",
                   server.base_url, "--world-size", "2", "--seed", "3", "--backoff", "0.01", "--steps", "2",
                   "--target", "0", "--no-cost", "--db", str(db), "--run", "r", "--json", "--no-sandbox"])
        out = capsys.readouterr().out
        sent = json.dumps([r["body"] for r in server.answered()])
    assert rc == 1, out
    stored = json.dumps(sqlite3.connect(db).execute("SELECT * FROM refine_steps").fetchall())
    screens = json.dumps([list(r) for r in sqlite3.connect(db).execute(
        "SELECT * FROM sqlite_master WHERE type='table'").fetchall()])
    assert "refine_steps" in screens
    everything = out + sent + stored + db.read_bytes().decode(errors="replace")
    # the twin: an ordinary variable's value, echoed the same way, does come back (so the path is real)
    assert ALLOWED["PKB_PROBE_VISIBLE"] in sent and ALLOWED["PKB_PROBE_VISIBLE"] in stored
    assert "[redacted $OPENAI_API_KEY]" in sent and "[redacted $OPENAI_API_KEY]" in out
    assert SECRETS["OPENAI_API_KEY"] not in everything

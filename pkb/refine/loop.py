"""The generate-screen-fix loop: send the task's prompt, take the candidate file from the reply, screen it,
send the feedback back, until a pass at the target speed-up or the step budget. Each step is stored as it
ends, so a stopped run resumes at the next step with its conversation rebuilt from the store. Many tasks
run at once (threads); the client bounds the requests in flight and the screener the screens."""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pkb.refine.client import ChatClient, Message, ModelError
from pkb.refine.extract import extract
from pkb.refine.feedback import for_model, passed
from pkb.refine.redact import redact
from pkb.refine.screening import Screener, ScreenSpec
from pkb.store import RefineStore, Step, candidate_sha
from pkbsim import ScreenResult

SYSTEM = ("You write multi-GPU kernels in Python. Each reply is one complete candidate file in a single ```python "
          "code block; the file is checked on a simulator of the machine and you get its findings back.")


@dataclass(frozen=True)
class TaskPlan:
    """One task of a run: how its candidates are screened, the first prompt, and where it may start."""
    spec: ScreenSpec
    prompt: str
    file_name: str                   # kernelgen's name for the task's file: <id>_<name>_<backend>.py
    start_from: str | None = None    # a file (kernelgen output) screened as step 0, before any request


@dataclass(frozen=True)
class LoopOptions:
    steps: int = 5                   # requests per task
    target: float = 1.0              # stop on a pass at or above this predicted speed-up


@dataclass
class TaskOutcome:
    task: str
    steps: list[Step] = field(default_factory=list)
    stopped: str = ""                # target, budget, or error
    error: str = ""

    @property
    def best(self) -> Step | None:
        """The fastest pass, else the last inconclusive step (a limit of pkb: for the GPU), else None."""
        passes = [s for s in self.steps if s.verdict == "pass"]
        if passes:
            return max(passes, key=lambda s: (s.speedup or 0.0, -s.step))
        inconclusive = [s for s in self.steps if s.verdict == "inconclusive"]
        return inconclusive[-1] if inconclusive else None


def refine_all(plans: list[TaskPlan], opts: LoopOptions, client: ChatClient, screener: Screener, store: RefineStore,
               run: str, parallel: int = 4, on_step: Callable[[Step], None] | None = None) -> list[TaskOutcome]:
    """Every task's loop, `parallel` tasks at once; the outcomes in the plans' order."""
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(plans)))) as pool:
        futures = [pool.submit(refine_task, p, opts, client, screener, store, run, on_step) for p in plans]
        return [f.result() for f in futures]


def refine_task(plan: TaskPlan, opts: LoopOptions, client: ChatClient, screener: Screener, store: RefineStore,
                run: str, on_step: Callable[[Step], None] | None = None) -> TaskOutcome:
    from tasks.registry import get  # torch: `pkb refine` imports this module for its parser (`pkb --help`)

    task = plan.spec.task
    reference = get(task).reference
    out = TaskOutcome(task, store.steps(run, task))
    if not out.steps and plan.start_from:
        out.steps.append(_screened(plan, opts, screener, store, run, 0, plan.prompt, "", _read(plan.start_from),
                                   None, time.time()))
        _tell(on_step, out.steps[-1])
    messages = conversation(plan.prompt, out.steps)
    while True:
        if any(s.result and passed(ScreenResult.from_json(s.result), opts.target) for s in out.steps):
            out.stopped = "target"
            return out
        done = sum(s.step > 0 for s in out.steps)
        if done >= opts.steps:
            out.stopped = "budget"
            return out
        n = max([s.step for s in out.steps], default=0) + 1
        started = time.time()
        try:
            reply = client.complete(messages)
        except ModelError as e:
            out.stopped, out.error = "error", str(e)
            return out
        got = extract(reply.text, reference)
        if got.code is None:
            step = Step(run, task, n, messages[-1].content, reply.text, None, None, None, "malformed", got.kind, None,
                        got.problem, reply.prompt_tokens, reply.completion_tokens, reply.seconds, 0.0, started,
                        time.time())
            store.put(step)
        else:
            step = _screened(plan, opts, screener, store, run, n, messages[-1].content, reply.text, got.code, reply,
                             started, out.steps)
        out.steps.append(step)
        _tell(on_step, step)
        messages += [Message("assistant", reply.text), Message("user", step.feedback)]


def conversation(prompt: str, steps: list[Step]) -> list[Message]:
    """The messages to send next: the task's prompt, then each step's reply and the feedback on it."""
    messages = [Message("system", SYSTEM), Message("user", prompt)]
    for s in steps:
        said = s.reply if s.step > 0 else f"```python\n{s.code}```"
        messages += [Message("assistant", said), Message("user", s.feedback)]
    return messages


def _screened(plan: TaskPlan, opts: LoopOptions, screener: Screener, store: RefineStore, run: str, n: int,
              prompt: str, reply_text: str, code: str, reply, started: float, earlier: list[Step] = ()) -> Step:
    sha = candidate_sha(code.encode())
    # named by content: a file the model sends again is the same file, whose stored screen names its lines
    path = os.path.join(store.steps_dir(run, plan.spec.task), f"cand_{sha[:12]}.py")
    with open(path, "w") as f:
        f.write(code)
    t0 = time.perf_counter()
    res = screener.screen(plan.spec, path)
    screen_s = round(time.perf_counter() - t0, 3)
    feedback = redact(for_model(res, code, opts.target))  # no secret goes back to the model (redact.py)
    again = [s.step for s in earlier if s.file_sha == sha]
    if again:
        feedback = f"This file is the same as the one of your step {again[0]}.\n" + feedback
    step = Step(run, plan.spec.task, n, prompt, reply_text, code, sha, path,
                str(res.verdict), str(res.stage), res.predicted.speedup if res.predicted else None,
                feedback, getattr(reply, "prompt_tokens", None),
                getattr(reply, "completion_tokens", None), getattr(reply, "seconds", 0.0), screen_s, started,
                time.time(), res.to_json())
    store.put(step)
    return step


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _tell(on_step, step: Step) -> None:
    if on_step:
        on_step(step)

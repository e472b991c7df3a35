"""One rank of a scoring job, started by torchrun: `python -m hwbackend.worker`.

It runs either the task's reference or the candidate's `solution` (never both: the two live in
different jobs), builds inputs from the per-call seeds the scorer sends (this rank's own and the call's
shared one, never a peer's), and reports back over the control channel. Integrity probes (guard.py)
are set up before the candidate is imported.
"""
from __future__ import annotations

import copy
import faulthandler
import gc
import importlib.util
import mmap
import os
import re
import sys
import traceback
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.utils._pytree import tree_flatten, tree_unflatten

from hwbackend.failures import is_cuda_error
from hwbackend.guard import Guard, leftover_threads
from hwbackend.protocol import Channel, connect, said
from hwbackend.result import FailureKind
from tasks.api import TaskContext, as_outputs, flat_tensors, signature_problem
from tasks.parallelkernelbench.checkout import register_checkout
from tasks.parallelkernelbench.naming import Checkout
from tasks.registry import get

POISON_BYTES = 64 << 20
STATUS_BYTES = 256  # a rank's status: a line of text, padded with NULs


class Worker:
    def __init__(self, ch: Channel):
        self.ch = ch
        self.rank, self.world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.local = int(os.environ.get("LOCAL_RANK", "0"))
        self.role, self.backend = os.environ["PKB_ROLE"], os.environ["PKB_BACKEND"]
        self.out_dir, self.status_path = os.environ["PKB_OUT"], os.path.join(os.environ["PKB_STATUS"], f"rank{self.rank}")
        self.status_map: mmap.mmap | None = None
        if "PKB_CHECKOUT" in os.environ:
            register_checkout(Checkout(os.environ["PKB_CHECKOUT"], os.environ["PKB_CHECKOUT_DTYPE"]))
        self.task = get(os.environ["PKB_TASK"])
        # ParallelKernelBench outputs may be None, numbers, sizes, lists and dicts around the tensors
        self.tensor_outputs = all(o.check is None for o in self.task.outputs)
        self.preset = os.environ.get("PKB_PRESET", "screen")
        if self.backend == "nccl":
            torch.cuda.set_device(self.local)
            self.device = torch.device("cuda", self.local)
        else:
            self.device = torch.device("cpu")
        self.status("init_process_group")
        dist.init_process_group(self.backend)
        self.guard = Guard(self.device, self.backend)
        # the poisoning fill doubles as the L2 flush, so it must be larger than L2 (B200: 126 MB)
        cuda = self.device.type == "cuda"
        self.l2_bytes = torch.cuda.get_device_properties(self.device).L2_cache_size if cuda else 0
        self.poison_bytes = max(POISON_BYTES, 2 * self.l2_bytes)
        self.fn = self.task.reference
        self.kept: list = []
        # the job's captured timed batch (`timed_graph`): replayed for every timed batch, its memory (placeholders,
        # outputs) held until the job ends
        self.graph: Batch | None = None
        self.fingerprints: list[str] = []  # of the inputs of the last checked call: [before, after]

    def status(self, text: str) -> None:
        """What this rank is doing, for a timeout's verdict: written into a shared mapping of its status file
        (a copy in memory, no system call: cheap enough for every step of a timed call)."""
        if self.status_map is None:
            fd = os.open(self.status_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            os.ftruncate(fd, STATUS_BYTES)
            self.status_map = mmap.mmap(fd, STATUS_BYTES)
            os.close(fd)
        self.status_map[:] = self.status_bytes(text)

    @staticmethod
    def status_bytes(text: str) -> bytes:
        data = text.encode()[:STATUS_BYTES]
        return data + bytes(STATUS_BYTES - len(data))

    def load_candidate(self) -> None:
        path = os.environ["PKB_CANDIDATE"]
        self.status("importing the candidate")
        builds_fail_as_compile_errors()
        spec = importlib.util.spec_from_file_location("pkb_candidate", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, "solution", None)
        problem = signature_problem(fn, self.task.reference)
        if problem:
            raise (AttributeError if not callable(fn) else TypeError)(problem)
        self.fn = fn

    def inputs(self, seeds: list[int]):
        """This rank's inputs of one call from [the call's shared seed, this rank's own seed]."""
        shared, own = seeds
        ctx = RankContext(self.rank, self.world, shared, 0, self.preset, dict(self.task.sizes[self.preset]),
                          self.device, own_seed=own)
        return self.task.make_inputs(ctx)

    def call(self, args, check: bool, first: bool = False, phase: str = "") -> tuple[tuple, list[str], float]:
        """One call on its own (a correctness trial, the first warm-up call), timed from a barrier-aligned start
        to a device sync plus barrier on every rank; the allocator poisoning (which also flushes L2) happens
        before the clock starts. With `phase`, each step is reported in the rank's status (`status`), which a
        timeout's verdict quotes per rank."""
        findings = []
        step = (lambda text: self.status(f"{phase}: {text}")) if phase else (lambda text: None)
        before = self.guard.fingerprint(flat_tensors(args)) if check else None
        self.guard.poison_allocator(self.poison_bytes)
        step("at the sync and barrier before the call")
        self.guard.sync()
        self.guard.barrier()
        threads = self.guard.threads() if check else None
        step(f"in {self.role} (solution called, not returned)")
        start = self.guard.start_timer()
        out = as_outputs(self.fn(*args))
        step(f"{self.role} returned; at the sync and barrier after the call")  # a memory copy, in the timed span
        self.guard.sync()
        self.guard.barrier()
        seconds = self.guard.stop_timer(start)
        if check:
            step("checking the call (inputs, outputs, threads left running)")
            self.fingerprints = [before, self.guard.fingerprint(flat_tensors(args))]
            if self.fingerprints[1] != before:
                findings.append("the candidate modified its inputs")
            findings += self.guard.output_problems(out, args, self.tensor_outputs)
            findings += leftover_threads(self.guard, threads, first)
        return out, findings, seconds

    def stage(self, seeds: list, label: str) -> Batch:
        """A batch's inputs and its status lines, made before the scorer starts its clock; the allocator's NaN
        poisoning (which also flushes L2) last, so that what the calls allocate comes from poisoned memory. The
        device's share of it (drawing the inputs, the fill) is finished here too: left queued, it ran inside the
        scorer's window of the batch, before the timed region, and made the clock check's tolerance 10-60% of
        a batch on an H100."""
        self.status(f"{label}: making its inputs")
        batch = Batch(label, [self.inputs(seed) for seed in seeds],
                      [self.status_bytes(f"{label}, call {i}: in {self.role} (solution called, not returned)")
                       for i in range(len(seeds))])
        self.guard.poison_allocator(self.poison_bytes)
        self.guard.sync()
        gc.collect()  # what the last batch left, collected here rather than at a random call of this one
        return batch

    def capture(self, calls: int, label: str) -> Batch:
        """A batch of `calls` captured in one CUDA graph (`pkb score --graphs`), on placeholders: tensors of the
        inputs' shapes, their contents not yet written, so that nothing the candidate does while it is captured
        (work on a stream outside the capture, a look at the memory) can see a timed call's inputs; their seeds
        reach this process only after the capture (`fill`). One draw from a seed of no call's gives the
        placeholders' structure. A candidate that cannot be captured (a host sync, a data-dependent shape) is
        GraphUnavailable: the scorer then times both jobs eagerly."""
        self.status(f"{label}: capturing {calls} calls in a CUDA graph")
        shape = self.inputs([0, 0])
        holders = [_placeholders(shape) for _ in range(calls)]
        del shape
        self.guard.sync()
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                outs = [as_outputs(self.fn(*args)) for args in holders]
        except Exception as e:  # noqa: BLE001 - whatever stops a capture: the scorer times eagerly
            raise GraphUnavailable(f"{self.role}'s calls could not be captured in a CUDA graph: "
                                   f"{type(e).__name__}: {str(e)[:300]}") from e
        return Batch(label, holders, [self.status_bytes(f"{label}: the CUDA graph of {calls} calls replaying")],
                     graph, outs)

    def timed_graph(self, calls: int, label: str) -> Batch:
        """The job's timed batch of `calls` calls as a CUDA graph: captured for the first timed batch, replayed for
        every later one with that batch's inputs copied into its placeholders (`fill`): a capture costs up to a
        millisecond a call (7 s for 7244 GEMM calls on an H200), once a job rather than once a batch. The
        candidate's host code runs only while the graph is captured, before any timed batch's seeds reach
        this process."""
        if self.graph is not None and len(self.graph.inputs) == calls:
            self.graph.label = label
            self.graph.steps = [self.status_bytes(f"{label}: the CUDA graph of {calls} calls replaying")]
            return self.graph
        self.graph = None  # its memory back before the next capture
        self.graph = self.capture(calls, label)
        return self.graph

    def fill(self, batch: Batch, seeds: list) -> None:
        """The captured batch's inputs, drawn from the calls' seeds and copied into its placeholders; finished on
        the device before the scorer's clock starts."""
        self.status(f"{batch.label}: copying its inputs in")
        for holders, seed in zip(batch.inputs, seeds):
            _copy_into(holders, self.inputs(seed))
        self.guard.sync()
        gc.collect()

    def run_batch(self, batch: Batch) -> tuple[list, float]:
        """The calls of `batch` back to back in one timed region, each on inputs of its own: the clock starts
        after a barrier and stops after a sync of every stream of the device, so all of every call's work is
        inside it, and the round trip to the host is paid once per batch, not per call. The scorer takes the
        slowest rank's time (and checks it against its own clock). Python's cyclic collector is off inside
        the region, as timeit has it: a full collection of a process that holds torch takes longer than many
        calls of a 20 us kernel, and whichever call it lands on is a matter of chance."""
        self.status(f"{batch.label}: at the sync and barrier before the batch")
        self.guard.sync()
        self.guard.barrier()
        outs = []
        collecting = gc.isenabled()
        gc.disable()
        start = self.guard.start_timer()
        if batch.graph is not None:
            self.status_map[:] = batch.steps[0]
            batch.graph.replay()
            outs = batch.outputs
        else:
            for step, args in zip(batch.steps, batch.inputs):
                self.status_map[:] = step  # a copy into the status mapping: no encoding inside the timed region
                outs.append(as_outputs(self.fn(*args)))
        self.status(f"{batch.label}: every call returned; at the device sync after the batch")
        self.guard.sync()
        seconds = self.guard.stop_timer(start)
        if collecting:
            gc.enable()
        self.status(f"{batch.label}: at the barrier after the batch")
        self.guard.barrier()
        return outs, seconds

    def warmup(self, seeds: list, graph: bool = False) -> dict:
        """The first call on its own (builds, caches), then the others as a timed batch: what the batch showed
        and the sizes the scorer needs to choose how many calls a timed batch holds (batch_size.py). With
        `graph`, the batch is captured in a CUDA graph and replayed (`capture`), and its time per call is the
        replay's: what a timed batch of the same protocol will take."""
        self.status("warm-up call 0: making its inputs")
        args = self.inputs(seeds[0])
        out, _, _ = self.call(args, check=False, phase="warm-up call 0")
        sizes = dict(input_bytes=_nbytes(args), output_bytes=_nbytes(out))
        del out, args
        if len(seeds) < 2:
            return dict(sizes, per_call_s=0.0)
        if graph:
            batch = self.capture(len(seeds) - 1, "warm-up batch")
            self.fill(batch, seeds[1:])
            batch.graph.replay()  # untimed: a graph's first replay uploads it, which made 9 calls of 2.5 us look 21.7
        else:
            batch = self.stage(seeds[1:], "warm-up batch")
        outs, seconds = self.run_batch(batch)
        del outs, batch
        if self.device.type == "cuda":
            sizes |= dict(free_bytes=torch.cuda.mem_get_info(self.device)[0], l2_bytes=self.l2_bytes)
        return dict(sizes, per_call_s=seconds / (len(seeds) - 1))

    def save(self, name: str, out: tuple, inputs=None) -> None:
        """The outputs of a call; with `inputs` (a correctness trial of the candidate), the input tensors as
        they are after the call beside them, in one file that keeps which tensors share memory, so that the
        scorer judges mutation and aliasing in its own process."""
        doc = list(out) if inputs is None else {"outputs": list(out), "inputs": flat_tensors(inputs)}
        path = os.path.join(self.out_dir, f"{name}-rank{self.rank}.pt")
        try:
            self.guard.save_file(_on_cpu(doc), path)
        except RuntimeError as e:  # views of one memory as different dtypes: torch.save takes them apart only
            if "different types" not in str(e):
                raise
            leaves, spec = tree_flatten(doc)
            self.guard.save_file(tree_unflatten([t.detach().cpu().clone() if isinstance(t, torch.Tensor) else t
                                                 for t in leaves], spec), path)

    def tampered(self) -> list[dict]:
        """The harness's watched names the candidate replaced, as findings for the channel."""
        return said([f"{name} was replaced by the candidate" for name in self.guard.tampered()])

    def serve(self) -> None:
        if self.role == "candidate":
            try:
                self.load_candidate()
            except SyntaxError as e:
                raise CompileError(f"{os.path.basename(e.filename or '?')}:{e.lineno}: {e.msg}") from e
        self.ch.send(event="ready", rank=self.rank, findings=self.tampered())
        while True:
            msg = self.ch.recv()
            phase = msg["phase"]
            if phase == "bye":
                return
            if phase == "correctness":
                findings, fingerprints = [], []
                for i, seed in enumerate(msg["seeds"]):
                    self.status(f"correctness trial {i}: making its inputs")
                    args = self.inputs(seed)
                    out, f, _ = self.call(args, check=True, first=i == 0, phase=f"correctness trial {i}")
                    self.status(f"correctness trial {i}: saving the outputs")
                    findings += said(f, f"trial{i}")
                    fingerprints.append(self.fingerprints)  # the reference's are what the scorer trusts
                    self.save(f"trial{i}", out, args if self.role == "candidate" else None)
                self.ch.send(event="done", findings=findings + self.tampered(), fingerprints=fingerprints)
            elif phase == "warmup":
                self.ch.send(event="done", findings=[], **self.warmup(msg["seeds"], msg.get("graph", False)))
            elif phase == "timed" and msg.get("graph"):  # captured first, its seeds sent after (`capture`)
                with stacks_after(msg.get("stacks_after_s")):
                    batch = self.timed_graph(msg["calls"], f"timed batch {msg['batch']}")
                    self.ch.send(event="captured")
                    self.fill(batch, self.ch.recv()["seeds"])
                self.ch.send(event="ready")
                self.ch.recv()  # go
                self.kept, seconds = self.run_batch(batch)
                self.ch.send(event="done", findings=[], seconds=[seconds])
                del batch
            elif phase == "timed":
                batch = self.stage(msg.pop("seeds"), f"timed batch {msg['batch']}")
                self.ch.send(event="ready")
                self.ch.recv()  # go
                self.kept, seconds = self.run_batch(batch)
                self.ch.send(event="done", findings=[], seconds=[seconds])
                del batch  # freeing the inputs takes milliseconds: after the scorer's clock stopped
            elif phase == "dump":
                for i in msg["indices"]:
                    self.save(f"timed{msg['batch']}-{i}", self.kept[i])
                self.kept = []
                self.ch.send(event="done", findings=self.tampered())


def _nbytes(tree) -> int:
    return sum(t.nbytes for t in flat_tensors(tree))


def _on_cpu(tree):
    """`tree` with its tensors moved to the CPU, keeping shared memory shared: the tensors on one device
    storage become views of one CPU copy of the span of it they cover (each tensor's own `.cpu()` would copy
    each view apart), so that a saved output that aliases an input still does when the scorer loads it."""
    leaves, spec = tree_flatten(tree)
    spans: dict[int, list[int]] = {}  # device storage -> [first byte, end byte] its tensors cover
    for t in leaves:
        if _shared_copy(t):
            size = t.element_size()
            first = t.storage_offset() * size
            end = first + size * (1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride())))
            span = spans.setdefault(t.untyped_storage().data_ptr(), [first, end])
            span[0], span[1] = min(span[0], first), max(span[1], end)
    copies: dict[int, tuple[int, torch.UntypedStorage]] = {}

    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        if not _shared_copy(t):
            return t.detach().cpu()
        storage = t.untyped_storage()
        if storage.data_ptr() not in copies:
            first, end = spans[storage.data_ptr()]
            first -= first % 16  # a multiple of every element size
            raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage)[first:end].to("cpu", copy=True)
            copies[storage.data_ptr()] = (first, raw.untyped_storage())
        first, copy = copies[storage.data_ptr()]
        offset = (t.storage_offset() * t.element_size() - first) // t.element_size()
        return torch.empty(0, dtype=t.dtype).set_(copy, offset, t.size(), t.stride())
    return tree_unflatten([move(t) for t in leaves], spec)


def _shared_copy(t) -> bool:
    """A tensor moved through one copy of its storage: a strided, non-empty one on a device (a CPU tensor is
    saved as it is, sharing kept)."""
    return isinstance(t, torch.Tensor) and t.device.type != "cpu" and t.layout == torch.strided and t.numel() > 0


@dataclass
class Batch:
    """A timed batch as staged: each call's inputs, and the status line written as it starts; a captured one
    (`Worker.capture`) also its CUDA graph and the outputs the graph writes, and one status line."""
    label: str
    inputs: list
    steps: list[bytes]
    graph: object = None
    outputs: list | None = None


@contextmanager
def stacks_after(seconds: float | None):
    """Every thread's Python stack written to the job's log if the block takes more than `seconds` (a capture
    that never answers: the scorer's bound quotes the log)."""
    if seconds:
        faulthandler.dump_traceback_later(seconds, exit=False)
    try:
        yield
    finally:
        if seconds:
            faulthandler.cancel_dump_traceback_later()


class GraphUnavailable(Exception):
    """A batch could not be captured in a CUDA graph (or its inputs did not fit the captured placeholders): not
    the candidate's fault, the scorer times the score eagerly instead."""


PLAIN = (int, float, str, bool, bytes, torch.dtype, torch.device)  # inputs a capture may read: must be the same


def _placeholders(args):
    """`args` with each device tensor replaced by an unwritten one of its shape, strides and dtype; everything
    else (numbers, host tensors, modules, whose weights `_copy_into` overwrites) kept from the draw."""
    leaves, spec = tree_flatten(args)
    return tree_unflatten([_placeholder(t) for t in leaves], spec)


def _placeholder(leaf):
    if isinstance(leaf, torch.Tensor) and leaf.device.type != "cpu":
        return torch.empty_strided(leaf.size(), leaf.stride(), dtype=leaf.dtype, device=leaf.device) \
            .requires_grad_(leaf.requires_grad)
    return copy.deepcopy(leaf) if isinstance(leaf, torch.nn.Module) else leaf  # a module of each call's own


def _copy_into(holders, drawn) -> None:
    """A call's drawn inputs copied into the placeholders a graph was captured on. Whatever the capture read on
    the host (numbers, host tensors, shapes) must be what the draw holds, or the graph is not this call's:
    GraphUnavailable."""
    have, spec = tree_flatten(holders)
    want, spec2 = tree_flatten(drawn)
    if spec != spec2:
        raise GraphUnavailable("a call's inputs are not of the structure the graph was captured with")
    with torch.no_grad():
        for h, w in zip(have, want):
            if isinstance(h, torch.nn.Module) and isinstance(w, torch.nn.Module):
                mine, theirs = h.state_dict(keep_vars=True), w.state_dict(keep_vars=True)
                if mine.keys() != theirs.keys() or any(mine[k].shape != theirs[k].shape for k in mine):
                    raise GraphUnavailable("a call's module inputs differ in their weights' shapes")
                for k in mine:
                    mine[k].copy_(theirs[k])
            elif isinstance(h, torch.Tensor) and h.device.type != "cpu":
                if not isinstance(w, torch.Tensor) or h.shape != w.shape or h.dtype != w.dtype:
                    raise GraphUnavailable("a call's inputs differ in shape or dtype from the graph's placeholders")
                h.copy_(w)
            elif isinstance(h, torch.Tensor):
                if not (isinstance(w, torch.Tensor) and h.shape == w.shape and torch.equal(h, w)):
                    raise GraphUnavailable("a call's host tensors differ from those the graph was captured with")
            elif type(h) is not type(w) or (isinstance(h, PLAIN) and h != w):
                raise GraphUnavailable(f"a call's input {h!r} differs from the {w!r} the graph was captured with")


@dataclass
class RankContext(TaskContext):
    """The Task API's context as a scoring rank has it: draws for this rank alone (`ctx.randn(...)`) come from
    the rank's own seed, which the scorer derived from its secret and the rank and sent to this rank only;
    draws every rank must hold identically (shared=True, and contexts whose rank is a replication key, as
    tasks/internode/_replicated.py makes) come from the call's shared seed, as in TaskContext."""
    own_seed: int = 0

    def generator(self, shared: bool = False) -> torch.Generator:
        if shared or not isinstance(self.rank, int):
            return super().generator(shared)
        gen = self._generators.get("own")
        if gen is None:
            gen = self._generators["own"] = torch.Generator().manual_seed(self.own_seed)
        return gen


class CompileError(Exception):
    """The candidate's Python or CUDA source does not compile."""


def builds_fail_as_compile_errors() -> None:
    """Make every extension build the candidate runs (`load_inline`/`load`, at import or on its first call)
    raise CompileError when nvcc or the host compiler fails, so that it is scored compile_error, not error."""
    from torch.utils import cpp_extension

    def wrap(build):
        def checked(*args, **kwargs):
            try:
                return build(*args, **kwargs)
            except ImportError as e:  # the library a concurrent build (another rank's) failed to produce
                raise CompileError(f"build error: the extension was not built (a build that failed on another "
                                   f"rank?): {e}") from e
            except Exception as e:
                if "Error building extension" in str(e) or "nvcc" in str(e):
                    raise CompileError(first_compiler_error(str(e)) or str(e)) from e
                raise
        return checked
    for name in ("load_inline", "load"):
        setattr(cpp_extension, name, wrap(getattr(cpp_extension, name)))


def classify(exc: BaseException) -> FailureKind:
    if isinstance(exc, CompileError):
        return FailureKind.COMPILE_ERROR
    if isinstance(exc, GraphUnavailable):
        return FailureKind.GRAPH_UNAVAILABLE
    if is_cuda_error(f"{type(exc).__name__}: {exc}") or type(exc).__name__ in ("AcceleratorError", "CudaError"):
        return FailureKind.CUDA_ERROR
    return FailureKind.EXCEPTION


_COMPILER_ERROR = re.compile(r"(\S+\.(?:cu|cuh|cpp|cc|h|hpp))[(:](\d+)\)?:?\s*(?:\d+:\s*)?(?:fatal )?error[:\s]",
                             re.IGNORECASE)


def first_compiler_error(text: str) -> str:
    """The first `file(line): error ...` (nvcc) or `file:line:col: error: ...` (gcc) line of a build log."""
    for line in text.splitlines():
        if _COMPILER_ERROR.search(line):
            return line.strip()
    return ""


def main() -> int:
    ch = connect(os.environ.pop("PKB_CONTROL"))
    rank = int(os.environ.get("RANK", "0"))
    ch.send(event="hello", rank=rank)  # before anything of the candidate's runs: the scorer orders ranks by it
    try:
        Worker(ch).serve()
        dist.destroy_process_group()
        return 0
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the scorer
        kind = classify(exc)
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        message = str(exc) if kind is FailureKind.COMPILE_ERROR else f"{type(exc).__name__}: {exc}"
        try:
            ch.send(event="error", kind=kind, rank=rank, message=message[:2000], traceback="".join(tb[-6:])[-3000:])
        except OSError:
            pass
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""The device kernels of real programs on one GPU at world size 1, for benchmarks/device_kernel_model_check.py's
`programs` comparison (issue 19, evidence 1): the fixed (`expect: ok`) twins of the labelled Triton corpus
(tests/corpus/dev_*triton*) and inline-CUDA corpus (tests/corpus_cuda), the inline-CUDA test programs
(tests/programs/cuda_*, in their correct modes), the Triton programs of tests/programs, and the known-good
symmetric-memory solutions of tasks/solutions plus the inline-CUDA candidate of tests/cuda_candidates. At world
size 1 every "peer" pointer of a symmetric-memory handle is the rank's own buffer: the kernels run on local
memory, and their barriers meet only themselves.

    . benchmarks/gpu_env.sh; python3 benchmarks/device_program_kernels.py measure OUTDIR [BUDGET_S] [--after=EARLIER.json]

Each program runs unchanged as a torchrun rank of a world of one (RANK=0, WORLD_SIZE=1, LOCAL_RANK=0), in its own
process, under torch.profiler: every GPU activity (kernel, memcpy, memset) with its device time, grid, block and
launch order is kept (`OUTDIR/device_program_kernels_measured.json`). The programs run at their own sizes (the
corpora's kernels are written at 128-4096 elements: those are the sizes the programs state; nothing larger runs
them). A solution runs at its task's full size (halved while the GPU is out of memory), on inputs made once:
two warm-up calls, the median of five CUDA-event-timed calls, then one profiled call with its CPU ops, so each
kernel can be put under the torch op that launched it.

Robust by construction: the inline-CUDA extensions are built first, in parallel and off the GPU (each program's
`load_inline` call evaluated against its module; cached per program in /tmp/pkb_ext/<stem>), while the solutions
and the Triton programs are timed; every program has a timeout; the JSON is rewritten after each one; the whole
run keeps inside BUDGET_S (default 500 s), skipping what is left and saying so. Imports only torch (and triton in
the programs that use it), never pkb.
"""
from __future__ import annotations

import ast
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT = "device_program_kernels_measured.json"

# (path, argv): the programs whose device kernels pkb times from their work (Triton's interpreter, the PTX
# interpreter). Only correct variants: a bug twin may hang or race on the GPU, and its time is not a kernel's.
TRITON_PROGRAMS = [
    ("tests/corpus/dev_D1_triton_wait_wrong_slot_fixed.py", []),
    ("tests/corpus/dev_D4_triton_relaxed_barrier_flags_fixed.py", []),
    ("tests/corpus/dev_D5_triton_all_to_all_signal_first_fixed.py", []),
    ("tests/corpus/dev_D5_triton_one_shot_no_entry_barrier_fixed.py", []),
    ("tests/corpus/dev_D5_triton_two_shot_no_phase_barrier_fixed.py", []),
    ("tests/corpus/dev_D6_triton_all_gather_reuse_fixed.py", []),
    ("tests/corpus/dev_D6_triton_one_shot_no_exit_barrier_fixed.py", []),
    ("tests/corpus/dev_D7_triton_grid_wait_co_residency_fixed.py", []),
    ("tests/programs/symm_barrier_side_stream.py", ["wait_stream", "triton"]),
    ("tests/programs/symm_large_buffers.py", ["64"]),
]
CUDA_PROGRAMS = [
    ("tests/corpus_cuda/cuda_D1_barrier_constant_flag_fixed.py", []),
    ("tests/corpus_cuda/cuda_D1_counter_barrier_count_fixed.py", []),
    ("tests/corpus_cuda/cuda_D1_root_skips_entry_barrier_fixed.py", []),
    ("tests/corpus_cuda/cuda_D1_wait_wrong_slot_fixed.py", []),
    ("tests/corpus_cuda/cuda_D2_flag_no_reset_fixed.py", []),
    ("tests/corpus_cuda/cuda_D2_ll_flag_constant_fixed.py", []),
    ("tests/corpus_cuda/cuda_D4_relaxed_cas_signal_fixed.py", []),
    ("tests/corpus_cuda/cuda_D4_ring_push_no_fence_fixed.py", []),
    ("tests/corpus_cuda/cuda_D5_all_to_all_signal_first_fixed.py", []),
    ("tests/corpus_cuda/cuda_D5_one_shot_no_entry_barrier_fixed.py", []),
    ("tests/corpus_cuda/cuda_D5_two_shot_no_phase_barrier_fixed.py", []),
    ("tests/corpus_cuda/cuda_D6_all_gather_no_exit_barrier_fixed.py", []),
    ("tests/corpus_cuda/cuda_D6_one_shot_no_exit_barrier_fixed.py", []),
    ("tests/corpus_cuda/cuda_D7_grid_barrier_co_residency_fixed.py", []),
    ("tests/corpus_cuda/cuda_W1_all_to_all_v_own_count_fixed.py", []),
    ("tests/corpus_cuda/cuda_W1_reduce_scatter_off_by_one_fixed.py", []),
    ("tests/corpus_cuda/cuda_W2_reduce_scatter_push_same_slot_fixed.py", []),
    ("tests/programs/cuda_epoch_flag_blocks.py", ["ok"]),
    ("tests/programs/cuda_one_shot_modes.py", ["ok"]),
    ("tests/programs/cuda_peer_struct_flags.py", ["aligned"]),
    ("tests/programs/cuda_pointer_table.py", ["live"]),
    ("tests/programs/cuda_sequential_flag_waits.py", ["set"]),
    ("tests/programs/cuda_dynamic_shared_memory.py", ["raised"]),
    ("tests/programs/cuda_cub_segmented_sort.py", []),
]
# Left out, with why (device_kernel_model_check.py prints these too).
EXCLUDED = {
    "tests/corpus/*_bug.py, tests/corpus_cuda/*_bug.py":
        "bug twins: a race or a deadlock by design; their GPU time is not a kernel's work",
    "tests/corpus/dev_*host*_fixed.py":
        "host-side symmetric-memory calls (put_signal, barrier, get_buffer copies): torch/symm_mem kernels, no "
        "Triton or inline CUDA; their copies are covered as the solutions' torch ops",
    "tests/corpus/[CEGPS]*.py":
        "NCCL collectives and P2P only, no device kernel of the program's own",
    "tests/corpus/dev_D1_triton_put_signal_count_fixed.py, dev_D2_triton_flag_reuse_no_reset_fixed.py, "
    "tests/corpus_cuda/cuda_D1_ring_wait_wrong_neighbour_fixed.py, cuda_D5_broadcast_pull_no_ready_wait_fixed.py":
        "need two ranks or more (a peer other than the rank itself, or root 1: IndexError / '2 to 32 ranks' / "
        "'bad root or world size' at world size 1)",
    "tests/corpus_cuda/cuda_D5_multimem_no_entry_barrier_fixed.py":
        "multimem (NVLS) instructions need a multicast object; the GPU machine runs with multicast off "
        "(TORCH_SYMM_MEM_DISABLE_MULTICAST=1, benchmarks/gpu_env.sh)",
    "tests/programs/*.py other modes":
        "the bug modes of the test programs (freed pointers, missing flags, misaligned flags, co-residency "
        "without a cooperative launch): they fault or hang by design",
    "tests/programs/all_ops.py, ddp_backend.py, tp_attention.py":
        "torch ops and NCCL collectives only (covered by benchmarks/single_gpu_model_check.py's per-task check)",
    "tests/ptx_kernels/*.cu":
        "bare kernels with no host program (the PTX differential, benchmarks/ptx_differential.py, checks their values)",
}
# Solutions (task slug, file relative to the repo or None for tasks/solutions/<slug>.py), timed at world size 1
# whatever the task's world-size rule says (a world of one is the one-GPU check, not a benchmark point).
SOLUTIONS = [
    ("all_gather", None), ("all_reduce", None), ("all_to_all", None), ("allgather_gemm_column_parallel", None),
    ("allreduce_residual_rmsnorm", None), ("gemm_allreduce_row_parallel", None),
    ("gemm_reduce_scatter_row_parallel", None), ("grpo_clipped_policy_loss", None), ("reduce_scatter", None),
    ("ring_attention_causal", None), ("ring_shift", None), ("rope_cp_allgather_kv", None),
    ("ulysses_qkv_all_to_all", None), ("vocab_parallel_cross_entropy", None),
    ("all_reduce", "tests/cuda_candidates/one_shot_all_reduce.py"),
]
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


SCALE = 64   # the second, larger run of each program: its size variable times this (a fixed grid stays fixed)
SIZE_VAR = re.compile(r"^(\s+)(n|chunk|shard)(\s*(?:,\s*\w+\s*)?=\s*)(\d+)\b", re.M)


def scaled_source(path: str, scale: int) -> tuple[str, str] | None:
    """(the program's source with its size variable, the first `n`/`chunk`/`shard` assigned a number in its
    `main`, times `scale`; what changed), or None if it has none. cuda_one_shot_modes.py reads its size from
    PKB_TEST_N instead (the caller sets it)."""
    src = open(os.path.join(ROOT, path)).read()
    start = src.find("def main")
    if start < 0:
        return None
    m = SIZE_VAR.search(src, start)
    if not m:
        return None
    new = f"{m.group(1)}{m.group(2)}{m.group(3)}{int(m.group(4)) * scale}"
    return src[:m.start()] + new + src[m.end():], f"{m.group(0).strip()} -> {new.strip()}"


def rank_env(port: int, ext_dir: str | None = None) -> dict:
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), TORCH_CUDA_ARCH_LIST="9.0", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
    if ext_dir:
        env["TORCH_EXTENSIONS_DIR"] = ext_dir
    return env


def gpu_events(trace_path: str, keep_cpu_ops: bool) -> dict:
    """GPU activities (and, if asked, CPU ops) of an exported chrome trace, in start order."""
    with open(trace_path) as f:
        doc = json.load(f)
    gpu, cpu = [], []
    for e in doc.get("traceEvents", []):
        cat, args = e.get("cat"), e.get("args") or {}
        if cat in GPU_CATS:
            gpu.append({"cat": cat, "name": e.get("name"), "ts": e.get("ts"), "dur": e.get("dur"),
                        "grid": args.get("grid"), "block": args.get("block"), "stream": args.get("stream"),
                        "ext": args.get("External id"), "shared_memory": args.get("shared memory")})
        elif keep_cpu_ops and cat == "cpu_op":
            cpu.append({"name": e.get("name"), "ts": e.get("ts"), "dur": e.get("dur"), "tid": e.get("tid"),
                        "ext": args.get("External id")})
    gpu.sort(key=lambda e: e["ts"] or 0)
    cpu.sort(key=lambda e: (e["ts"] or 0, -(e["dur"] or 0)))
    return {"gpu": gpu, "cpu_ops": cpu} if keep_cpu_ops else {"gpu": gpu}


# ---------------------------------------------------------------- one program (a subprocess of `measure`)
def run_program(path: str, argv: list[str], out_json: str, scale: int = 1) -> None:
    """Run one program as rank 0 of a world of one under torch.profiler (its size variable times `scale`);
    write its GPU activities."""
    import traceback

    import torch
    from torch.profiler import ProfilerActivity, profile
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    error, t0, changed = None, time.time(), None
    src = open(path).read()
    if scale > 1:
        if "PKB_TEST_N" in src:
            changed = f"PKB_TEST_N={os.environ['PKB_TEST_N']}"
        else:
            src, changed = scaled_source(path, scale)
    code = compile(src, os.path.abspath(path), "exec")
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    prof.start()
    try:
        exec(code, {"__name__": "__main__", "__file__": os.path.abspath(path), "__builtins__": __builtins__})
        torch.cuda.synchronize()
    except SystemExit as e:
        if e.code not in (None, 0):
            error = f"SystemExit({e.code!r})"
    except BaseException as e:   # the program's own failure: record it, keep what ran
        error = "".join(traceback.format_exception_only(type(e), e)).strip()[-600:]
    finally:
        try:
            torch.cuda.synchronize()
        except Exception:
            pass
        prof.stop()
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(trace)
        doc = gpu_events(trace, keep_cpu_ops=False)
    doc.update(program=path, argv=argv, error=error, wall_s=round(time.time() - t0, 2), scale=scale, scaled=changed)
    with open(out_json, "w") as f:
        json.dump(doc, f)


# ---------------------------------------------------------------- building the CUDA extensions ahead
def build_program(path: str) -> None:
    """Build the program's load_inline extension(s) without running it or touching the GPU: only the module's
    imports, definitions and call-free assignments (its source strings) are executed, then each load_inline
    call's arguments are evaluated against them. A call whose arguments need the running program (a local)
    is left to the timed run."""
    from torch.utils.cpp_extension import load_inline
    src = open(path).read()
    tree = ast.parse(src)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and getattr(n.func, "id", getattr(n.func, "attr", None)) == "load_inline"]
    if not calls:
        print("no load_inline call")
        return

    def call_free(node):
        return not any(isinstance(n, ast.Call) for n in ast.walk(node))
    keep = [st for st in tree.body if isinstance(st, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))
            or (isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None and call_free(st.value))]
    ns = {"__name__": "pkb_build", "__file__": os.path.abspath(path)}
    exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), ns)

    def ev(node):
        return eval(compile(ast.Expression(node), path, "eval"), ns)
    for call in calls:
        try:
            args, kwargs = [ev(a) for a in call.args], {k.arg: ev(k.value) for k in call.keywords}
        except Exception as e:
            print(f"arguments need the running program ({e!r}): built by its timed run")
            continue
        kwargs.setdefault("verbose", False)
        load_inline(*args, **kwargs)
        print("built", kwargs.get("name", args[0] if args else "?"))


# ---------------------------------------------------------------- the solutions (one subprocess)
def run_solutions(out_json: str, deadline: float) -> None:
    import importlib.util

    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    from cuda_events import event_times_us

    from tasks.api import TaskContext
    from tasks.registry import get
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    rows, floor = [], {}

    def save():
        with open(out_json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "floor": floor,
                       "rows": rows}, f)
    try:   # the device time of a minimal kernel, as the profiler reports it (the calibration's tiny kernel)
        x = torch.zeros(1, device="cuda")
        for _ in range(20):
            x.add_(1)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(200):
                x.add_(1)
            torch.cuda.synchronize()
        durs = [e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        floor.update(op="x.add_(1), one float32", launches=len(durs), median_us=statistics.median(durs),
                     min_us=min(durs), max_us=max(durs))
        log(f"minimal kernel: {floor['median_us']:.2f} us device time (median of {len(durs)})")
    except Exception as e:
        floor["error"] = repr(e)[:300]
    for slug, path in SOLUTIONS:
        if time.time() > deadline:
            rows.append({"task": slug, "candidate": path, "error": "skipped: out of time"})
            log(f"{slug} {path or ''}: skipped, out of time")
            continue
        row = {"task": slug, "candidate": path or f"tasks/solutions/{slug}.py"}
        t0 = time.time()
        try:
            task = get(slug)
            spec = importlib.util.spec_from_file_location(f"pkb_solution_{slug}", os.path.join(ROOT, row["candidate"]))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            fn = module.solution
            size = dict(task.sizes["full"])
            for _ in range(6):   # full size, else halve its largest dimension until the inputs and a call fit
                try:
                    args = task.make_inputs(TaskContext(0, 1, 0, 0, "full", dict(size), torch.device("cuda", 0)))
                    for _ in range(2):
                        fn(*args)
                    torch.cuda.synchronize()
                    break
                except torch.cuda.OutOfMemoryError:
                    args = None
                    torch.cuda.empty_cache()
                    key = max((k for k, v in size.items() if isinstance(v, int)), key=lambda k: size[k])
                    size[key] //= 2
            else:
                raise RuntimeError("out of memory at every size tried")
            row["size"], row["full"] = size, size == dict(task.sizes["full"])
            times = event_times_us(fn, args, 5)
            row["event_us"], row["event_spread_us"] = statistics.median(times), [min(times), max(times)]
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                fn(*args)
                torch.cuda.synchronize()
            with tempfile.TemporaryDirectory() as tmp:
                trace = os.path.join(tmp, "trace.json")
                prof.export_chrome_trace(trace)
                row.update(gpu_events(trace, keep_cpu_ops=True))
            log(f"{slug} {path or ''}: {row['event_us']:.1f} us, {len(row['gpu'])} GPU activities, size {size}, "
                f"{time.time() - t0:.1f} s")
        except Exception as e:
            row["error"] = repr(e)[:600]
            log(f"{slug} {path or ''}: ERROR {e!r}"[:400])
        args = None
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        rows.append(row)
        save()
    save()
    dist.destroy_process_group()


# ---------------------------------------------------------------- the driver
def run_solutions_process(parts, sol_json, deadline, budget_s, pump_builds, next_port, me, ext_root) -> None:
    """Time the solutions in one process of their own, at most 35% of the budget, while the builds go on."""
    with open(os.path.join(parts, "solutions.log"), "w") as fh:
        sol_deadline = min(deadline - 60, time.time() + 0.35 * budget_s)
        proc = subprocess.Popen([sys.executable, me, "solutions", sol_json, str(sol_deadline)], cwd=ROOT,
                                stdout=fh, stderr=subprocess.STDOUT, env=rank_env(next_port(), f"{ext_root}/solutions"))
        while proc.poll() is None and time.time() < sol_deadline + 60:
            pump_builds()
            time.sleep(1)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def measure(outdir: str, budget_s: float, after: str | None = None) -> None:
    """`after`: an earlier run's JSON whose clean rows (the solutions, each program at each scale) are kept, not
    run again, so a later call spends its budget on what that one left out."""
    t_start = time.time()
    prev = json.load(open(after)) if after else {"programs": [], "solutions": None}
    kept = {(r["program"], tuple(r.get("argv", [])), r.get("scale", 1)): r for r in prev["programs"]
            if not r.get("error")}
    deadline = t_start + budget_s
    os.makedirs(outdir, exist_ok=True)
    parts = os.path.join(outdir, "parts")
    os.makedirs(parts, exist_ok=True)
    ext_root = "/tmp/pkb_ext"
    me = os.path.abspath(__file__)
    doc = {"budget_s": budget_s, "excluded": EXCLUDED, "programs": [], "solutions": None, "builds": {}}
    try:
        import torch
        import triton
        doc.update(gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                   cuda=torch.version.cuda)
    except Exception as e:
        doc["env_error"] = repr(e)
    result = os.path.join(outdir, RESULT)

    def save():
        with open(result, "w") as f:
            json.dump(doc, f, indent=1)
    save()
    port = [29600]

    def next_port():
        port[0] += 1
        return port[0]

    # 1. builds of the CUDA extensions: CPU only, in parallel, while the GPU work below runs
    log(f"building {len(CUDA_PROGRAMS)} CUDA extensions in the background")
    builds = {}
    build_cap = max(2, min(10, (os.cpu_count() or 4) - 4))
    # (file, its extensions' directory): the solutions' inline-CUDA candidate first (the solutions process, which
    # starts now, reaches it last), then the programs in the order they are timed
    pending = [(p, f"{ext_root}/solutions") for _, p in SOLUTIONS if p and "load_inline" in open(os.path.join(ROOT, p)).read()]
    pending += [(p, f"{ext_root}/{stem(p)}") for p, _ in CUDA_PROGRAMS]

    def pump_builds():
        for p, (proc, fh, t0) in list(builds.items()):
            if proc.poll() is None and time.time() - t0 > 240:
                proc.kill()
        running = sum(1 for proc, _, _ in builds.values() if proc.poll() is None)
        while pending and running < build_cap:
            p, ext_dir = pending.pop(0)
            fh = open(os.path.join(parts, stem(p) + ".build.log"), "w")
            proc = subprocess.Popen([sys.executable, me, "build", p], cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                    env=dict(rank_env(next_port(), ext_dir), CUDA_VISIBLE_DEVICES=""))
            builds[p] = (proc, fh, time.time())
            running += 1

    pump_builds()

    def run_one(path, argv, kind, scale=1):
        if (path, tuple(argv), scale) in kept:
            log(f"{path} {' '.join(argv)} x{scale}: kept from {after}")
            return kept[(path, tuple(argv), scale)]
        name = stem(path) + (f".x{scale}" if scale > 1 else "")
        out = os.path.join(parts, name + ".json")
        left = deadline - time.time()
        row = {"program": path, "argv": argv, "kind": kind, "scale": scale}
        if left < 15:
            row["error"] = "skipped: out of time"
            log(f"{path}: skipped, out of time")
            return row
        limit = 45.0   # a program runs in seconds once built; a hang must not eat the budget
        if kind == "cuda":   # wait for its build (its timed run would build it anyway, in more time)
            while path not in builds and any(p == path for p, _ in pending) and time.time() < deadline - 15:
                pump_builds()
                time.sleep(0.5)
            proc = builds[path][0] if path in builds else None
            while proc is not None and proc.poll() is None and time.time() < deadline - 15:
                pump_builds()
                time.sleep(0.5)
            if proc is None or proc.poll() != 0 or "built" not in open(os.path.join(parts, stem(path) + ".build.log")).read():
                limit = 150.0
        t0 = time.time()
        env = rank_env(next_port(), f"{ext_root}/{stem(path)}")
        env.update(PKB_SCALE=str(scale), PKB_TEST_N=str(1024 * scale))
        with open(os.path.join(parts, name + ".log"), "w") as fh:
            proc = subprocess.Popen([sys.executable, me, "program", path, out, *argv], cwd=ROOT, stdout=fh,
                                    stderr=subprocess.STDOUT, env=env)
            try:
                proc.wait(timeout=max(5.0, min(limit, deadline - time.time() - 5)))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                row["error"] = f"timeout after {time.time() - t0:.0f} s"
        if os.path.exists(out):
            with open(out) as f:
                got = json.load(f)
            row.update({k: v for k, v in got.items() if k not in ("program", "argv")})
        elif "error" not in row:
            row["error"] = f"exit {proc.returncode}: " + open(os.path.join(parts, name + ".log")).read()[-600:]
        kernels = [e for e in row.get("gpu", []) if e["cat"] == "kernel"]
        log(f"{path} {' '.join(argv)} x{scale}: {len(kernels)} kernels, {time.time() - t0:.1f} s"
            + (f"  ERROR {row['error'][-200:]}" if row.get("error") else ""))
        return row

    # 2. the solutions, one process (symmetric buffers are cached per process group)
    sol_json = os.path.join(parts, "solutions.json")
    if isinstance(prev.get("solutions"), dict) and prev["solutions"].get("rows"):
        with open(sol_json, "w") as f:
            json.dump(prev["solutions"], f)
        open(os.path.join(parts, "solutions.log"), "w").write(f"solutions kept from {after}\n")
    else:
        log(f"timing {len(SOLUTIONS)} solutions at world size 1")
        run_solutions_process(parts, sol_json, deadline, budget_s, pump_builds, next_port, me, ext_root)
    if os.path.exists(sol_json):
        with open(sol_json) as f:
            doc["solutions"] = json.load(f)
    else:
        doc["solutions"] = {"error": open(os.path.join(parts, "solutions.log")).read()[-1500:]}
    save()
    print(open(os.path.join(parts, "solutions.log")).read()[-3000:], flush=True)

    # 3. the Triton programs, then 4. the CUDA programs, one at a time
    for path, argv in TRITON_PROGRAMS:
        pump_builds()
        doc["programs"].append(run_one(path, argv, "triton"))
        save()
    for path, argv in CUDA_PROGRAMS:
        doc["programs"].append(run_one(path, argv, "cuda"))
        save()
    # 5. the same programs again with their size variable times SCALE (those that ran clean and have one)
    for path, argv in TRITON_PROGRAMS + CUDA_PROGRAMS:
        first = next((r for r in doc["programs"] if r["program"] == path and r["scale"] == 1), None)
        if first is None or first.get("error"):
            continue
        if "PKB_TEST_N" not in open(os.path.join(ROOT, path)).read() and scaled_source(path, SCALE) is None:
            continue
        doc["programs"].append(run_one(path, argv, first["kind"], SCALE))
        save()
    for p, (proc, fh, t0) in builds.items():
        if proc.poll() is None:
            proc.kill()
        fh.close()
        doc["builds"][p] = {"rc": proc.poll(), "log": open(os.path.join(parts, stem(p) + ".build.log")).read()[-300:]}
    doc["wall_s"] = round(time.time() - t_start, 1)
    save()
    for f in os.listdir(parts):   # their content is in the result; the logs stay
        if f.endswith(".json"):
            os.remove(os.path.join(parts, f))
    n_ok = sum(1 for r in doc["programs"] if not r.get("error"))
    log(f"done in {doc['wall_s']} s: {n_ok}/{len(doc['programs'])} programs ran clean; wrote {result}")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    after = next((a.split("=", 1)[1] for a in sys.argv[2:] if a.startswith("--after=")), None)
    args = [a for a in sys.argv[2:] if not a.startswith("--after=")]
    if cmd == "measure" and len(args) in (1, 2):
        measure(args[0], float(args[1]) if len(args) == 2 else 500.0, after)
    elif cmd == "program":
        run_program(sys.argv[2], sys.argv[4:], sys.argv[3], int(os.environ.get("PKB_SCALE", "1")))
    elif cmd == "build":
        build_program(sys.argv[2])
    elif cmd == "solutions":
        run_solutions(sys.argv[2], float(sys.argv[3]))
    elif cmd == "list":
        for p, a in TRITON_PROGRAMS + CUDA_PROGRAMS:
            sc = scaled_source(p, SCALE) if os.path.exists(os.path.join(ROOT, p)) else None
            print(p, *a, "exists" if os.path.exists(os.path.join(ROOT, p)) else "MISSING", "|", sc and sc[1])
        for s, p in SOLUTIONS:
            print(s, p or f"tasks/solutions/{s}.py")
        for k, v in EXCLUDED.items():
            print("excluded:", k, "-", v)
    else:
        sys.exit(__doc__)

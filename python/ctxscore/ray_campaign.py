"""A fuzzing campaign over a Ray cluster: one task per shard of one seeded
campaign (`ctxscore gate --shard K/N --seed S`), the gate's port running
inside the task, a GPU per task where asked; the failing fixtures gathered
into one folder, progress shown across tasks, a task that dies retried once
and then reported; the shards' reports merged (`ctxscore merge`) into the
result.

    python -m ctxscore.ray_campaign --shards 64 --seed 7 --out campaign/ \\
        --gpus-per-shard 1 -- --port "python3 -m ctxscore.port my_kernel:scores" --cases 100000

Without --address it starts a local cluster (a laptop's); --address auto
joins the cluster this machine belongs to. Everything after `--` goes to
every shard's `ctxscore gate`. The --out folder receives shards/K-of-N.json (each shard's
report, its fixture paths pointing into its failures/), failures/ (every
shard's failing fixtures), merged.json and merged.xml (JUnit). The exit
status is the merged report's (0 passed, 1 failed), 2 for bad usage, a
shard that died twice or shards that do not merge.

The harness binary is $CTXSCORE_BIN, else the one installed with this
package, on every node."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from .cli import binary as installed_binary
from .wire_format import EXIT_STATUS


class ShardDied(RuntimeError):
    """A shard's gate ended without a verdict (a crash, a signal, bad usage): Ray retries the task."""


def run_shard(gate_args, k, n, seed):
    """One shard's gate on this node: its JSON report and its failing fixtures' bytes."""
    import socket

    found = installed_binary()
    if not found:
        raise ShardDied(f"shard {k}/{n} on {socket.gethostname()}: no ctxscore binary (set CTXSCORE_BIN)")
    with tempfile.TemporaryDirectory(prefix=f"ctxscore-shard-{k}-") as scratch:
        failures = os.path.join(scratch, "failures")
        done = subprocess.run([found, "gate", *gate_args, "--shard", f"{k}/{n}", "--seed", str(seed), "--json",
                               "--failures", failures], capture_output=True, text=True)
        if done.returncode not in (EXIT_STATUS["passed"], EXIT_STATUS["failed"]):
            raise ShardDied(f"shard {k}/{n} on {socket.gethostname()}: `ctxscore gate` exited with status "
                            f"{done.returncode}; its stderr ends: {done.stderr.strip()[-2000:]}")
        fixtures = {}
        for name in sorted(os.listdir(failures)) if os.path.isdir(failures) else ():
            with open(os.path.join(failures, name), "rb") as f:
                fixtures[name] = f.read()
        return {"shard": k, "report": done.stdout, "failures_dir": failures, "fixtures": fixtures,
                "host": socket.gethostname()}


def gathered(result, failures_dir):
    """The shard's report with each fixture moved from the shard's node into
    `failures_dir`: a failing row's `fixture` field is rewritten, and the
    lines made from it (`replay`, `where`) are left out, for `ctxscore
    merge` composes them again from the fields."""
    report = json.loads(result["report"])
    moved = {os.path.join(result["failures_dir"], name): os.path.join(failures_dir, name) for name in result["fixtures"]}
    for suite in report["suites"]:
        for row in suite["failing"]:
            if row["fixture"] in moved:
                row["fixture"] = moved[row["fixture"]]
                del row["replay"], row["where"]
    return json.dumps(report, indent=2)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ours, gate_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    ap = argparse.ArgumentParser(prog="python -m ctxscore.ray_campaign", description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, required=True, help="N: tasks, each one shard of the campaign")
    ap.add_argument("--seed", type=int, required=True, help="the campaign's seed: every shard draws from it")
    ap.add_argument("--out", required=True, help="the folder for the shards' reports, the fixtures and the merged report")
    ap.add_argument("--address", default=None, help="a Ray cluster to join (`auto`: this machine's); default: start a local one")
    ap.add_argument("--gpus-per-shard", type=float, default=0, help="GPUs each task holds (Ray sets CUDA_VISIBLE_DEVICES)")
    ap.add_argument("--cpus-per-shard", type=float, default=1, help="CPUs each task holds (default 1)")
    ap.add_argument("--retries", type=int, default=1, help="times a task that dies is run again (default 1)")
    args = ap.parse_args(ours)
    if args.shards < 1:
        ap.error(f"--shards {args.shards}: expected 1 or more")
    if args.seed < 0:
        ap.error(f"--seed {args.seed}: expected a seed of 0 or more")
    for own in ("--shard", "--seed", "--json", "--failures", "--junit"):
        if own in gate_args:
            ap.error(f"{own} after `--`: the launcher sets it for every shard")
    found = installed_binary()
    if not found:
        ap.error("no ctxscore binary: set CTXSCORE_BIN, or install a ctxscore wheel for this platform")

    import ray

    out = os.path.abspath(args.out)
    shards_dir, failures_dir = os.path.join(out, "shards"), os.path.join(out, "failures")
    os.makedirs(shards_dir, exist_ok=True)
    os.makedirs(failures_dir, exist_ok=True)
    ray.init(address=args.address, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"CTXSCORE_BIN": os.environ["CTXSCORE_BIN"]}} if os.environ.get("CTXSCORE_BIN") else None)
    task = ray.remote(run_shard).options(num_gpus=args.gpus_per_shard, num_cpus=args.cpus_per_shard,
                                         max_retries=args.retries, retry_exceptions=[ShardDied])
    started = time.monotonic()
    pending = {task.remote(gate_args, k, args.shards, args.seed): k for k in range(1, args.shards + 1)}
    files, died, failing = [], [], 0
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        k = pending.pop(ready[0])
        try:
            result = ray.get(ready[0])
        except Exception as e:  # a task that died again after its retries
            died.append((k, str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__))
            print(f"ctxscore campaign: shard {k}/{args.shards} died after {args.retries} retr"
                  f"{'y' if args.retries == 1 else 'ies'}: {died[-1][1]}", file=sys.stderr)
            continue
        for name, data in result["fixtures"].items():
            with open(os.path.join(failures_dir, name), "wb") as f:
                f.write(data)
        path = os.path.join(shards_dir, f"{k}-of-{args.shards}.json")
        with open(path, "w") as f:
            f.write(gathered(result, failures_dir))
        files.append(path)
        failing += not json.loads(result["report"])["ok"]
        print(f"ctxscore campaign: {len(files) + len(died)} of {args.shards} shards done, {failing} failing, "
              f"{len(died)} died ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    ray.shutdown()
    if died:
        for k, why in died:
            print(f"ctxscore campaign: shard {k}/{args.shards} has no report ({why}); run it alone: "
                  f"ctxscore gate {' '.join(gate_args)} --shard {k}/{args.shards} --seed {args.seed}", file=sys.stderr)
        return 2
    merged = subprocess.run([found, "merge", *sorted(files), "--json", "--junit", os.path.join(out, "merged.xml")],
                            capture_output=True, text=True)
    if merged.returncode not in (EXIT_STATUS["passed"], EXIT_STATUS["failed"]):
        print(merged.stderr.strip(), file=sys.stderr)
        return 2
    with open(os.path.join(out, "merged.json"), "w") as f:
        f.write(merged.stdout)
    report = json.loads(merged.stdout)
    for suite in report["suites"]:
        print(f"  {suite['summary']}")
    print(f"merged report: {os.path.join(out, 'merged.json')} (JUnit: merged.xml); failing fixtures: {failures_dir}")
    if not os.listdir(failures_dir):
        shutil.rmtree(failures_dir)
    return merged.returncode


if __name__ == "__main__":
    sys.exit(main())

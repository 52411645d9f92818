"""The host time the processes' stop vote (`casan_hf.training.preemption.StopVote`) adds to each training step of a
run of several processes: read the last step's vote, cast this step's. Run it in each process of torchrun:

    torchrun --standalone --nproc_per_node 2 scripts/profile_stop_vote.py --steps 2000

Between two votes each process does a step's worth of work (`--work` matrix products of 256 x 256) and all-reduces
its "gradients" (the 256 x 256 matrix), as data-parallel training does, so that the processes keep step as they do
there and the vote's wait measures its own cost, not one process waiting for a slower one; the vote's cost is the
host time of its two calls, median and 99th percentile over the steps, per process.
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist

from casan_hf.training.preemption import StopVote


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="Steps, each ending in one vote.")
    parser.add_argument("--work", type=int, default=4, help="Matrix products of 256 x 256 between two votes.")
    args = parser.parse_args(argv)
    dist.init_process_group("gloo")
    vote, matrix, costs = StopVote(), torch.randn(256, 256), []
    for _ in range(args.steps):
        for _ in range(args.work):
            matrix = torch.tanh(matrix @ matrix)
        dist.all_reduce(matrix)
        matrix /= dist.get_world_size()
        start = time.perf_counter()
        if vote.result():
            raise SystemExit("no process was signalled, yet the vote says stop")
        vote.cast(False)
        costs.append(time.perf_counter() - start)
    vote.result()
    costs.sort()
    median, p99 = statistics.median(costs), costs[int(0.99 * len(costs))]
    print(f"process {dist.get_rank()}: vote {median * 1e6:.0f} us median, {p99 * 1e6:.0f} us p99 per step")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

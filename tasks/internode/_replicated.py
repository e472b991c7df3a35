"""Random inputs that a set of ranks must hold identically (a parameter shard replicated across nodes,
the replicas of one expert), drawn through the Task API's own seeding so they still change per trial."""
import dataclasses


def replicated_context(ctx, *key):
    """A context whose draws depend only on (seed, trial, key): every rank asking for the same key gets the
    same tensors, different keys get independent ones, and none collides with a rank's own stream."""
    return dataclasses.replace(ctx, rank=("replicated", *key), _generators={})

"""SigLIP's chunked sigmoid contrastive loss: text embeddings travel around a ring of ranks so each rank
scores its images against the whole global batch without ever materialising the full similarity
matrix (big_vision's siglip "chunked" loss, open_clip SigLipLoss with neighbour exchange).

Rank r holds B image embeddings img (B, D) and the B text embeddings of the same pairs txt (B, D), both
L2-normalised, plus the shared learnable temperature t and bias b. Every image i is scored against
every text j of the global batch: logit = t * <img_i, txt_j> + b; the pair label is +1 for the matching
text (same rank, same row) and -1 otherwise, and the pair's loss is -log sigmoid(label * logit). The
ring: score the local texts (the positives sit on the diagonal), then ws-1 times pass the text block to
rank r+1 while receiving the next one from rank r-1, scoring it as negatives.

Output: image_loss (B,) fp32, each local image's loss summed over all ws*B texts (the SigLIP loss is the
sum of these over all ranks divided by ws*B; that final scalar all-reduce is left out, since one scalar
makes a weak check).
Tolerance: fp32 defaults (sums of ws*B terms of order one; the order is the implementation's choice).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "siglip_ring_sigmoid_loss"
ID = 124
TITLE = "SigLIP chunked sigmoid loss: text embeddings passed around the ring"
CATEGORY = "application"
ORIGIN = "big_vision SigLIP (chunked sigmoid loss) / open_clip SigLipLoss neighbour exchange"
WORLD_SIZES = WorldSizes(min=2)
# full: SigLIP So400m-scale embeddings (1152), 4096 pairs per GPU (32K global batch)
SIZES = {"screen": {"batch": 16, "dim": 32}, "full": {"batch": 4096, "dim": 1152}}
OUTPUTS = [Output("image_loss", torch.float32, shape=lambda s, ws, r: (s["batch"],))]


def make_inputs(ctx):
    s = ctx.size
    img = F.normalize(ctx.randn(s["batch"], s["dim"]), dim=-1)
    # each text is a noisy copy of its image, so positives score high and negatives near zero
    txt = F.normalize(img + ctx.randn(s["batch"], s["dim"], scale=0.8), dim=-1)
    temperature = 10.0 + ctx.rand(1, shared=True)
    bias = -10.0 + ctx.rand(1, shared=True)
    return img, txt, temperature, bias


def _pair_losses(img, txt, temperature, bias, positive):
    logits = temperature * img @ txt.T + bias
    labels = -torch.ones_like(logits)
    if positive:
        labels.fill_diagonal_(1.0)
    return -F.logsigmoid(labels * logits).sum(dim=1)


def reference(img, txt, temperature, bias):
    world, rank = dist.get_world_size(), dist.get_rank()
    image_loss = _pair_losses(img, txt, temperature, bias, positive=True)
    block = txt
    for _ in range(world - 1):
        incoming = torch.empty_like(block)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, block, (rank + 1) % world),
                                       dist.P2POp(dist.irecv, incoming, (rank - 1) % world)])
        for req in reqs:
            req.wait()
        block = incoming
        image_loss = image_loss + _pair_losses(img, block, temperature, bias, positive=False)
    return image_loss


def speed_of_light(size, world_size):
    b, d = size["batch"], size["dim"]
    return {"link_bytes_per_rank": (world_size - 1) * b * d * 4, "flops": 2 * world_size * b * b * d}

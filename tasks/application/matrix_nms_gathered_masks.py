"""Matrix NMS over instance masks gathered from all ranks: SOLOv2's greedy-free, parallel suppression
(mmdet mask_matrix_nms, gaussian kernel) applied to the detections of an image whose instances were
predicted on different GPUs (sliced / tiled inference that merges the per-GPU detections).

Rank r holds N detections: binary masks (N, H, W) uint8 over the full image, scores (N,) fp32 (distinct
across all ranks) and class labels (N,) int64. The masks, scores and labels are all-gathered; then over
the ws*N detections sorted by descending score:

    iou[j, i]   mask IoU (intersection / union of the pixel sets) where j scores higher than i and both
                have the same label, else 0
    comp[j]     max over detections k scoring higher than j of iou[k, j] (how much j was itself
                suppressed)
    decay[i]    min over j of exp(-sigma * (iou[j, i]^2 - comp[j]^2))       (sigma = 2)
    decayed score = score * decay

Output: this rank's decayed scores (N,) fp32, in its input order. There is no greedy loop, so the result
is deterministic; mask areas and intersections are exact integer counts (exact in fp32, also with bf16
tensor-core products and fp32 accumulation).
Tolerance: fp32 defaults (one division and one exp per pair; the reductions are min/max).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "matrix_nms_gathered_masks"
ID = 125
TITLE = "Matrix NMS (SOLOv2) over masks all-gathered from every rank"
CATEGORY = "application"
ORIGIN = "SOLOv2 Matrix NMS (mmdet mask_matrix_nms, gaussian kernel) over per-GPU detections of one image"
WORLD_SIZES = WorldSizes(min=2)
# full: 256 mask proposals per GPU (2048 in all) at SOLOv2's 1/4-resolution mask size, 80 COCO classes
SIZES = {"screen": {"detections": 16, "height": 24, "width": 32, "objects": 6, "classes": 3},
         "full": {"detections": 256, "height": 200, "width": 336, "objects": 100, "classes": 80}}
OUTPUTS = [Output("decayed_scores", torch.float32, shape=lambda s, ws, r: (s["detections"],))]
SIGMA = 2.0


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    n, h, w = s["detections"], s["height"], s["width"]
    # objects every rank sees (shared); each detection is a jittered box around one of them
    size = torch.tensor([h, w], device=ctx.device)
    centre = ctx.rand(s["objects"], 2, shared=True) * size
    half = (0.1 + 0.2 * ctx.rand(s["objects"], 2, shared=True)) * size
    obj_label = ctx.randint(0, s["classes"], (s["objects"],), shared=True)
    obj = ctx.randint(0, s["objects"], (n,))
    c = (centre[obj] + half[obj] * 0.3 * ctx.randn(n, 2)).clamp(min=0).minimum(size - 1)
    hh = half[obj] * (0.7 + 0.3 * ctx.randn(n, 2).abs())
    lo, hi = (c - hh).floor(), (c + hh).ceil()               # never empty: the pixel at c is inside
    ys = torch.arange(h, device=ctx.device)[None, :, None]
    xs = torch.arange(w, device=ctx.device)[None, None, :]
    masks = ((ys >= lo[:, 0, None, None]) & (ys < hi[:, 0, None, None])
             & (xs >= lo[:, 1, None, None]) & (xs < hi[:, 1, None, None]))
    # distinct scores: a shared permutation of the global slots, this rank's slice, plus jitter
    slots = ctx.randperm(ws * n, shared=True)[ctx.rank * n:(ctx.rank + 1) * n]
    scores = (slots + 0.5 + 0.4 * (ctx.rand(n) - 0.5)) / (ws * n)
    return masks.to(torch.uint8), scores, obj_label[obj]


def _gather(t):
    out = t.new_empty(dist.get_world_size() * t.shape[0], *t.shape[1:])
    dist.all_gather_into_tensor(out, t.contiguous())
    return out


def reference(masks, scores, labels):
    rank, n = dist.get_rank(), masks.shape[0]
    all_masks, all_scores, all_labels = _gather(masks), _gather(scores), _gather(labels)
    order = torch.argsort(all_scores, descending=True)
    flat = all_masks[order].flatten(1).float()
    inter = flat @ flat.T
    area = flat.sum(1)
    iou = inter / (area[:, None] + area[None, :] - inter)
    lab = all_labels[order]
    higher = torch.ones_like(iou, dtype=torch.bool).triu(1) & (lab[:, None] == lab[None, :])
    iou = torch.where(higher, iou, 0.0)                       # iou[j, i]: j scores higher than i
    comp = iou.max(dim=0).values                              # comp[j]
    decay = torch.exp(-SIGMA * (iou.square() - comp[:, None].square())).min(dim=0).values
    decayed = torch.empty_like(all_scores)
    decayed[order] = all_scores[order] * decay
    return decayed[rank * n:(rank + 1) * n]


def speed_of_light(size, world_size):
    n, h, w = size["detections"], size["height"], size["width"]
    total = world_size * n
    return {"link_bytes_per_rank": (world_size - 1) * n * (h * w + 4 + 8), "flops": 2 * n * total * h * w}

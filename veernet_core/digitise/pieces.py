"""Connected pieces of ink: a compiled 8-connected labeller over a bool image, with each piece's box and
pixel count. The depth-number finder (`track_numbers`) reads glyphs from it and the dot finder (`dots`)
tells dots from dashes and lines by it."""

from __future__ import annotations

import numpy as np

from veernet_core.digitise.tracer_loop import _compiled

START_LABELS = 256  # provisional labels the union-find table holds before it first doubles


@_compiled
def labelled(ink: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The 8-connected pieces of a (H, W) bool image: per pixel its piece's label (0 on paper, pieces from 1),
    and per piece (label - 1) its first row, last row, first column, last column and pixel count."""
    height, width = ink.shape
    label = np.zeros((height, width), dtype=np.int32)
    parent = np.zeros(START_LABELS, dtype=np.int32)  # grown by doubling as provisional labels are made
    count = 0
    for r in range(height):
        for c in range(width):
            if not ink[r, c]:
                continue
            best = 0
            for dr, dc in ((-1, -1), (-1, 0), (-1, 1), (0, -1)):
                rr, cc = r + dr, c + dc
                if rr < 0 or cc < 0 or cc >= width or label[rr, cc] == 0:
                    continue
                root = label[rr, cc]
                while parent[root] != root:
                    root = parent[root]
                if best == 0:
                    best = root
                elif root != best:
                    if root < best:
                        parent[best] = root
                        best = root
                    else:
                        parent[root] = best
            if best == 0:
                count += 1
                if count >= parent.size:
                    grown = np.zeros(parent.size * 2, dtype=np.int32)
                    grown[: parent.size] = parent
                    parent = grown
                parent[count] = count
                best = count
            label[r, c] = best
    final = np.zeros(count + 1, dtype=np.int32)
    pieces = 0
    for k in range(1, count + 1):
        root = k
        while parent[root] != root:
            root = parent[root]
        if root == k:
            pieces += 1
            final[k] = pieces
    for k in range(1, count + 1):
        root = k
        while parent[root] != root:
            root = parent[root]
        final[k] = final[root]
    boxes = np.zeros((pieces, 5), dtype=np.int64)
    boxes[:, 0] = height
    boxes[:, 2] = width
    boxes[:, 1] = -1
    boxes[:, 3] = -1
    for r in range(height):
        for c in range(width):
            k = label[r, c]
            if k == 0:
                continue
            p = final[k]
            label[r, c] = p
            b = p - 1
            boxes[b, 0] = min(boxes[b, 0], r)
            boxes[b, 1] = max(boxes[b, 1], r)
            boxes[b, 2] = min(boxes[b, 2], c)
            boxes[b, 3] = max(boxes[b, 3], c)
            boxes[b, 4] += 1
    return label, boxes

from collections import deque

import numpy as np

from veernet_core.digitise.pieces import START_LABELS, labelled


def _reference(ink: np.ndarray) -> list[tuple[int, int, int, int, int, frozenset[tuple[int, int]]]]:
    """Every 8-connected piece by breadth-first search: (first row, last row, first column, last column,
    pixel count, its pixels), sorted."""
    seen = np.zeros_like(ink)
    pieces = []
    for r, c in zip(*np.nonzero(ink), strict=True):
        if seen[r, c]:
            continue
        seen[r, c] = True
        queue, pixels = deque([(int(r), int(c))]), []
        while queue:
            y, x = queue.popleft()
            pixels.append((y, x))
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    yy, xx = y + dy, x + dx
                    if 0 <= yy < ink.shape[0] and 0 <= xx < ink.shape[1] and ink[yy, xx] and not seen[yy, xx]:
                        seen[yy, xx] = True
                        queue.append((yy, xx))
        ys, xs = zip(*pixels, strict=True)
        pieces.append((min(ys), max(ys), min(xs), max(xs), len(pixels), frozenset(pixels)))
    return sorted(pieces, key=lambda p: (p[0], p[2], p[1], p[3], p[4]))


def _found(ink: np.ndarray) -> list[tuple[int, int, int, int, int, frozenset[tuple[int, int]]]]:
    label, boxes = labelled(ink)
    assert label.max() == len(boxes)
    assert not label[~ink].any() and label[ink].min() >= 1
    pieces = []
    for k, (r0, r1, c0, c1, n) in enumerate(boxes, start=1):
        ys, xs = np.nonzero(label == k)
        pixels = frozenset(zip(ys.tolist(), xs.tolist(), strict=True))
        assert (ys.min(), ys.max(), xs.min(), xs.max(), len(pixels)) == (r0, r1, c0, c1, n)
        pieces.append((int(r0), int(r1), int(c0), int(c1), int(n), pixels))
    return sorted(pieces, key=lambda p: (p[0], p[2], p[1], p[3], p[4]))


def test_the_pieces_are_the_8_connected_components_with_their_boxes_and_counts() -> None:
    rng = np.random.default_rng(5)
    for density in (0.1, 0.3, 0.45, 0.6):
        for _ in range(20):
            ink = rng.random((int(rng.integers(1, 30)), int(rng.integers(1, 40)))) < density
            assert _found(ink) == _reference(ink)


def test_pieces_joined_only_through_a_later_row_are_one_piece() -> None:
    ink = np.zeros((5, 9), dtype=bool)
    ink[0, [0, 2, 4, 6, 8]] = True  # five starts that the row below joins into one "comb"
    ink[1, :] = True
    ink[3, 0] = ink[4, 1] = True  # diagonal neighbours are one piece
    found = _found(ink)
    assert [p[:5] for p in found] == [(0, 1, 0, 8, 14), (3, 4, 0, 1, 2)]


def test_more_pieces_than_the_first_label_table_holds_are_each_their_own() -> None:
    ink = np.zeros((2 * 40, 2 * 40), dtype=bool)
    ink[::2, ::2] = True  # 1,600 lone pixels, each its own piece
    assert START_LABELS < 40 * 40
    label, boxes = labelled(ink)
    assert len(boxes) == 40 * 40
    assert (boxes[:, 4] == 1).all()
    assert _found(ink) == _reference(ink)

"""A page's log sections told from the other ruled things on it: a header block's ruled table is no section (it
leaves no depth column open), and a grid that starts or ends between two of its lattice's steps keeps the
frame line that closes it."""

from __future__ import annotations

import numpy as np

from veernet_core.digitise.layout.analyse import make_upright

WIDTH, HEIGHT = 1200, 2400
SPACING = 25
BORDERS = (100, 450, 550, 1100)  # track 1, the depth column, track 2


def _page(table: bool = True, top_frame: int = 700, bottom_frame: int = 2225) -> np.ndarray:
    """A white page: a ruled table of ten rules and three columns at the top (a header block's well data),
    then a log section whose depth lines run every SPACING rows from row 712 across both tracks (not the depth
    column), closed by frame lines at `top_frame` and `bottom_frame` across the whole section and its borders."""
    page = np.full((HEIGHT, WIDTH), 250, dtype=np.uint8)
    if table:
        for row in range(100, 461, 40):
            page[row:row + 2, 100:1101] = 0
        for column in (100, 400, 700, 1099):
            page[100:462, column:column + 2] = 0
        page[130:140, 150:380] = 0  # some text in its cells
    for row in range(712, bottom_frame - 5, SPACING):
        page[row, BORDERS[0]:BORDERS[1]] = 0
        page[row, BORDERS[2]:BORDERS[3]] = 0
    for row in (top_frame, bottom_frame):
        page[row - 1:row + 2, BORDERS[0]:BORDERS[3] + 1] = 0
    for column in BORDERS:
        page[top_frame:bottom_frame + 1, column - 1:column + 2] = 0
    page[620:640, 150:400] = 0  # the track header's text
    page[620:640, 650:1000] = 0
    return page


def test_a_ruled_table_above_the_log_is_not_a_section_and_the_page_stays_upright() -> None:
    upright = make_upright(_page())
    assert upright.turn == 0
    [section] = upright.sections
    assert abs(section.top - 700) <= 1 and abs(section.bottom - 2225) <= 1


def test_a_grid_closed_between_two_lattice_steps_keeps_its_frame_lines() -> None:
    """The frames lie 12 and 13 rows (about half a step) off the lattice of depth lines: they close the section."""
    [section] = make_upright(_page(table=False)).sections
    assert abs(section.top - 700) <= 1 and abs(section.bottom - 2225) <= 1
    [section] = make_upright(_page(table=False, top_frame=712, bottom_frame=2212)).sections  # on the lattice
    assert abs(section.top - 712) <= 1 and abs(section.bottom - 2212) <= 1


def test_evenly_spaced_legend_lines_over_a_grid_do_not_seed_a_lattice_of_every_other_line() -> None:
    """Four legend lines 34 rows apart, then a grid every 15.3 rows: followed at about twice the grid's
    spacing, a run from the legend would pass over every other grid line one at a time. The grid is one run at
    its own spacing, from its first line, and the legend lines are not in it."""
    from veernet_core.digitise.layout.lines import chains

    legend = [468.5, 503.8, 538.4, 572.0, 606.0, 675.0]
    grid = list(698.1 + 15.3 * np.arange(100))
    centres = np.array(legend + grid)
    [run] = chains(centres, 8)
    assert centres[run[0]] == 698.1 and len(run) == 100
    assert np.allclose(np.diff(centres[run]), 15.3)


def test_a_table_whose_rules_lead_into_the_grid_at_another_spacing_is_split_off() -> None:
    """Table rules 48 rows apart, three legend lines about 50 apart, then the grid every 43 rows from its frame:
    followed as one run they drift from one spacing to the other. The run is split where its spacing changes,
    the grid keeping its frame line."""
    from veernet_core.digitise.layout.sections import _one_spacing

    centres = np.array([58, 105, 153, 201, 249, 297, 345, 393, 441, 537, 587, 637, *(689 + 43 * np.arange(60))],
                       dtype=np.float64)
    run = list(range(centres.size))
    table, grid = _one_spacing(run, centres)
    assert centres[grid[0]] == 689 and len(grid) == 60 and centres[table[-1]] < 689
    even = np.array(689 + 43 * np.arange(60), dtype=np.float64)
    assert _one_spacing(list(range(60)), even) == [list(range(60))]


def test_a_table_that_leaves_several_cells_open_is_not_a_section() -> None:
    """A short run of rules that leaves more than one column open (rules spanning some of a table's columns
    only) is a table; a log's short section leaves one open, its depth column."""
    page = _page(table=False)
    for row in range(100, 400, 40):  # eight rules; every other one spans the first two of four columns only
        page[row:row + 2, 100:(1101 if row % 80 == 20 else 600)] = 0
    for column in (100, 350, 600, 850, 1099):
        page[100:382, column:column + 2] = 0
    upright = make_upright(page)
    assert upright.turn == 0
    [section] = upright.sections
    assert abs(section.top - 700) <= 1


def test_a_sections_depth_lattice_keeps_its_spacing_where_curves_flat_stretches_split_most_gaps() -> None:
    """Forty depth lines 19.4 px apart and, after most of them, a curve's flat stretch read as a line 6.5 px
    below it: most gaps between the lines found are such pieces. The lattice keeps the section's own spacing
    (its run of lines that keep to one lattice) and every depth line where it is; the pieces are off it."""
    from veernet_core.digitise.layout.depth import _lattice
    from veernet_core.digitise.layout.lines import Line, typical_gap

    depth = [434.0 + 19.4 * k for k in range(40)]
    strays = [row + 6.5 for k, row in enumerate(depth[:-1]) if k % 5 != 2]
    lines = sorted((Line(row, int(row) - 1, int(row) + 1, 1.0, 1.0) for row in depth + strays),
                   key=lambda line: line.centre)
    assert abs(typical_gap(np.array([line.centre for line in lines])) - 19.4) > 2  # what the gaps alone say
    grid = _lattice(lines, 19.4)
    assert grid is not None
    assert abs(grid.lattice.spacing - 19.4) < 0.05
    assert grid.lines == len(depth)
    assert max(abs(grid.row(k) - row) for k, row in enumerate(depth)) < 0.1

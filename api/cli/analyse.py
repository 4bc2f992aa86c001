"""`veernet analyse SCAN [-o calibration.yaml]`: a full-page scan's proposed calibration (POST /scans/analyse),
shown as a summary with each field's confidence and written as YAML or JSON for a person to confirm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from api.cli import views
from api.cli.client import DEFAULT_URL, ApiError, VeerNetClient
from api.cli.client_commands import CLIENT_PANEL, AsJson, Key, Url, api, write_file


def analyse(
    scan: Annotated[Path, typer.Argument(help="one page: TIFF (any mode), PNG or JPEG", show_default=False)],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="write the proposal here: .json as JSON, anything "
                                             "else as YAML", show_default=False)] = None,
    dpi: Annotated[float | None, typer.Option(help="the scan's resolution, when its file states none or a wrong "
                                              "one", show_default=False)] = None,
    as_json: AsJson = False, url: Url = DEFAULT_URL, key: Key = None,
) -> None:
    """Propose a full-page log's calibration: orientation, sections, tracks, depth fit, value grids, curves."""
    with api(url, key) as client, views.Spinner(f"analysing {scan.name}"):
        proposal = _request(client, scan, dpi)
    if out is not None:
        write_file(out, _serialised(proposal, out))
    if as_json:
        typer.echo(json.dumps(proposal, indent=2))
        return
    show_proposal(proposal)
    if out is not None:
        views.out.print(f"wrote the proposal to {escape(str(out))}: confirm or correct each field, fill in the "
                        "empty ones", markup=True)


def _request(client: VeerNetClient, scan: Path, dpi: float | None) -> dict[str, Any]:
    try:
        data = scan.read_bytes()
    except OSError as exc:
        raise ApiError(f"cannot read the scan {scan}: {exc.strerror or exc}") from exc
    form = {} if dpi is None else {"dpi": str(dpi)}
    response = client.request("POST", "/scans/analyse", files={"file": (scan.name, data)}, data=form, timeout=300.0)
    return dict(response.json())


def _serialised(proposal: dict[str, Any], path: Path) -> bytes:
    if path.suffix.lower() == ".json":
        return json.dumps(proposal, indent=2).encode()
    import yaml

    return yaml.safe_dump(proposal, sort_keys=False, allow_unicode=True).encode()


def show_proposal(proposal: dict[str, Any]) -> None:
    orientation = proposal["orientation"]
    views.out.print(f"turned {orientation['turn']['value']} degrees clockwise "
                    f"({_confidence(orientation['turn'])}), skew {orientation['skew_deg']['value']} degrees "
                    f"({_confidence(orientation['skew_deg'])})", markup=False)
    for k, section in enumerate(proposal["sections"], 1):
        views.out.print(section_line(k, section), markup=False)
        views.out.print(_tracks_table(section))
    for message in proposal["messages"]:
        views.err.print(f"note: {message}", markup=False)


def section_line(k: int, section: dict[str, Any]) -> str:
    rows, depth = section["rows"]["value"], section["depth"]
    span = depth["range"]
    depths = f"{span[0]:g}-{span[1]:g} {depth['unit']['value']}" if span else "depths not read"
    residual = f", residual {depth['residual']:g}" if depth["residual"] is not None else ""
    return (f"section {k}: rows {rows['top']:g}-{rows['bottom']:g}, {section['scale']['value'] or 'scale unknown'} "
            f"({_confidence(section['scale'])}), {depths} ({_confidence(depth['ticks'])}{residual})")


def _tracks_table(section: dict[str, Any]) -> Table:
    table = Table("track", "columns", "grid", "curves (name unit left..right style, and ink and weight where read)",
                  show_lines=False)
    for j, track in enumerate(section["tracks"], 1):
        extent, grid = track["extent"]["value"], track["grid"]["value"]
        grid_text = f"{grid['scale']} {grid['divisions']}" if grid else "-"
        curves = "; ".join(_curve_text(c) for c in track["curves"]) or "(none read)"
        table.add_row(str(j), escape(f"{extent['left']:g}-{extent['right']:g} ({_confidence(track['extent'])})"),
                      escape(f"{grid_text} ({_confidence(track['grid'])})"), escape(curves))
    return table


def _curve_text(curve: dict[str, Any]) -> str:
    def value(name: str) -> str:
        got = curve[name]["value"]
        return "?" if got is None else f"{got:g}" if isinstance(got, float) else str(got)
    hints = [str(curve[name]["value"]) for name in ("ink", "weight") if (curve.get(name) or {}).get("value")]
    return " ".join([f"{value('mnemonic')} {value('unit')} {value('left')}..{value('right')} {value('style')}", *hints])


def _confidence(field: dict[str, Any]) -> str:
    return "not read" if field.get("value") is None else f"{field['confidence']:.0%} sure"


def register(app: typer.Typer) -> None:
    app.command("analyse", rich_help_panel=CLIENT_PANEL)(analyse)

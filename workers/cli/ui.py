"""`remedy ui`: the Web UI's URLs and the views to save in it (registered in __init__.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from workers.cli.connection import temporal


def ui(
    url: Annotated[
        str, typer.Option("--url", help="The Web UI's address (the demo prints it).")
    ] = "http://127.0.0.1:8233",
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the first view (the fleet) in a browser.")
    ] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="The views as a Markdown table (docs/ui.md).")
    ] = False,
) -> None:
    """The Web UI views to save (Save as View, then Configure Columns): each view's URL with
    its query typed in, the query, and remedy's search attributes to add as columns — the list
    shows workflow ids only until you do."""
    import webbrowser

    from workers.ui_views import VIEWS, list_url, text
    from workers.ui_views import markdown as views_markdown

    namespace = temporal(None).namespace or "default"
    typer.echo(views_markdown() if markdown else "\n".join(text(url, namespace)))
    if open_browser:
        webbrowser.open(list_url(url, namespace, VIEWS[0].query))

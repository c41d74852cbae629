"""`hlo-opt html INPUT -o OUT.html`: an offline HTML page (graph + text) for any module."""
from __future__ import annotations

import os

import click

from ..api import load_modules_from_text, read_input
from ..errors import HloError
from ..fileutil import write_output


@click.command("html")
@click.argument("input")
@click.option("-o", "--output", required=True, help="The .html file to write.")
@click.option("--top-level", is_flag=True,
              help="Draw fusions as single nodes and leave their bodies out (XLA's "
                   ".top_level.html).")
@click.option("--shared-assets", is_flag=True,
              help="Write the scripts once into hlo_opt_assets/ beside OUT and link to them "
                   "(small pages; keep the folder with the page).")
@click.option("--title", default=None, help="Page title (default: the module name).")
@click.option("--module-index", default=0, show_default=True,
              help="Which module of a file split by '// -----' lines.")
def command(input, output, top_level, shared_assets, title, module_index):
    """Render INPUT (a path or '-') as one HTML page that needs no network."""
    from ..dump.html import module_to_html, write_shared_assets
    text, filename = read_input(input)
    modules = load_modules_from_text(text, filename, split="\n// -----" in text)
    if not 0 <= module_index < len(modules):
        raise HloError(f"{filename}: error: --module-index={module_index} but the file holds "
                       f"{len(modules)} module(s)")
    module = modules[module_index]
    href = None
    if shared_assets:
        try:
            href = write_shared_assets(os.path.dirname(os.path.abspath(output)))
        except OSError as e:
            raise HloError(f"{output}: error: cannot write the shared assets ({e})") from None
    page = module_to_html(module, title or module.name, asset_dir_href=href,
                          top_level=top_level)
    write_output(output, page)
    click.echo(f"wrote {output} ({len(page.encode('utf-8')) / 1e6:.2f} MB, "
               f"{module.instruction_count()} instructions)", err=True)

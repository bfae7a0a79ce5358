"""The ``edgeplan`` command line: a thin layer over the Python API (no algorithm lives here).

Heavy libraries are imported inside the commands, so ``edgeplan --help`` stays fast.
"""

from __future__ import annotations

import sys

import click

from edgeplan.cli.common import Context
from edgeplan.errors import EdgeplanError

__all__ = ["cli", "main", "run_group"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", type=click.Path(file_okay=False), default=None, envvar="EDGEPLAN_HOME",
              help="Folder of the measurement Store and device profiles (default: $EDGEPLAN_HOME or the user cache).")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
@click.version_option(package_name="edgeplan")
@click.pass_context
def cli(ctx: click.Context, home: str | None, debug: bool) -> None:
    """edgeplan: how fast will this model run on that hardware, and how should it be deployed there."""
    argv = ctx.obj.argv if isinstance(ctx.obj, Context) else ()
    ctx.obj = Context(home=home, debug=debug, argv=argv)


def _register_commands() -> None:
    from edgeplan.cli import (
        calibrate_cmd,
        inspect_cmd,
        measure_cmd,
        offload_cmd,
        ops_cmd,
        partition_cmd,
        predict_cmd,
        primitives_cmd,
        ranges_cmd,
        select_cmd,
        zoo_cmd,
    )

    cli.add_command(zoo_cmd.zoo)
    cli.add_command(inspect_cmd.inspect)
    cli.add_command(measure_cmd.measure)
    cli.add_command(predict_cmd.predict)
    cli.add_command(calibrate_cmd.calibrate)
    cli.add_command(ops_cmd.ops)
    cli.add_command(ranges_cmd.profile_ranges_cmd)
    cli.add_command(offload_cmd.offload)
    cli.add_command(partition_cmd.partition)
    cli.add_command(primitives_cmd.primitives)
    cli.add_command(select_cmd.select)


_register_commands()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; print errors on one line and return a non-zero exit code (tracebacks only with --debug)."""
    return run_group(cli, "edgeplan", sys.argv[1:] if argv is None else argv)


def run_group(group: click.Group, prog_name: str, args: list[str]) -> int:
    """Run a click group as ``main`` does: errors on one line and a non-zero exit code, tracebacks with --debug."""
    debug = "--debug" in args
    try:
        group.main(args=args, prog_name=prog_name, standalone_mode=False, obj=Context(argv=tuple(args)))
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except EdgeplanError as e:
        if debug:
            raise
        click.echo(f"error: {e}", err=True)
        return e.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except OSError as e:  # a path too long, a folder that is a file, a full disk, no permission
        if debug:
            raise
        where = (f" ({e.filename}); check the path, or use --home / EDGEPLAN_HOME for a writable folder"
                 if e.filename else "")
        click.echo(f"error: {e.strerror or e}{where} (--debug shows where it failed)", err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

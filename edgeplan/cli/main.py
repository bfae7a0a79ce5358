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
    """edgeplan: how fast will this model run on that hardware, and how should it be deployed there.

    \b
    Models       zoo, inspect
    Latency      measure (time it here), predict (a device profile's estimate),
                 calibrate (a device profile from a few latencies measured there)
    Decisions    select (conv primitives), offload (mobile/cloud split),
                 partition (pipeline over an edge cluster)
    Cost data    profile ops|ranges|primitives (measure here, into the Store)
    Cost models  ops fit (the op-wise models of predict, offload, partition),
                 primitives fit|evaluate|transfer|list (the models of select)

    \b
    Example:
      edgeplan predict torchvision:resnet18 --device torch-fp32-1t
      edgeplan select torchvision:resnet18 --run
    """
    argv = ctx.obj.argv if isinstance(ctx.obj, Context) else ()
    ctx.obj = Context(home=home, debug=debug, argv=argv)


def _register_commands() -> None:
    from edgeplan.cli import (
        calibrate_cmd,
        costmodel_cmd,
        inspect_cmd,
        measure_cmd,
        offload_cmd,
        ops_cmd,
        partition_cmd,
        predict_cmd,
        primitives_cmd,
        profile_cmd,
        select_cmd,
        zoo_cmd,
    )

    for command in (costmodel_cmd.fit, costmodel_cmd.evaluate, costmodel_cmd.transfer):
        primitives_cmd.primitives.add_command(command)
    for top in (zoo_cmd.zoo, inspect_cmd.inspect, measure_cmd.measure, predict_cmd.predict, calibrate_cmd.calibrate,
                select_cmd.select, offload_cmd.offload, partition_cmd.partition, profile_cmd.profile, ops_cmd.ops,
                primitives_cmd.primitives):
        cli.add_command(top)


_register_commands()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; print errors on one line and return a non-zero exit code (tracebacks only with --debug)."""
    return run_group(cli, "edgeplan", sys.argv[1:] if argv is None else argv)


def run_group(group: click.Command, prog_name: str, args: list[str], obj: object = None,
              debug: bool | None = None) -> int:
    """Run a click command as ``main`` does: errors on one line and a non-zero exit code, tracebacks with --debug.

    ``obj`` is the context object the command receives (default: a :class:`Context` of ``args``); ``debug``
    overrides the ``--debug`` found in ``args``.
    """
    debug = "--debug" in args if debug is None else debug
    try:
        group.main(args=args, prog_name=prog_name, standalone_mode=False,
                   obj=Context(argv=tuple(args)) if obj is None else obj)
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

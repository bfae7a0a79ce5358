"""``edgeplan profile ...``: the campaigns that measure on this machine what the cost models learn from, into the
Store (resumable), each with ``--export`` to write its data file.

- ``profile ops``: every op's latency in a runtime scenario (:mod:`edgeplan.cli.ops_cmd`), for ``ops fit``;
- ``profile ranges``: every contiguous layer range of a model (:mod:`edgeplan.cli.ranges_cmd`), for ``offload``;
- ``profile primitives``: every convolution primitive on layer configurations (:mod:`edgeplan.cli.primitives_cmd`),
  for ``primitives fit`` and ``primitives transfer``.
"""

from __future__ import annotations

import click

__all__ = ["profile"]


@click.group("profile")
def profile() -> None:
    """Measure on this machine what the cost models learn from, into the Store (resumable; --export writes it)."""


def _register() -> None:
    from edgeplan.cli.ops_cmd import profile_ops_cmd
    from edgeplan.cli.primitives_cmd import profile_primitives_cmd
    from edgeplan.cli.ranges_cmd import profile_ranges_cmd

    for command in (profile_ops_cmd, profile_ranges_cmd, profile_primitives_cmd):
        profile.add_command(command)


_register()

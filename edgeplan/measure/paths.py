"""Where edgeplan keeps a user's data. Nothing here creates a file or folder."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["HOME_ENV", "STORE_FILENAME", "default_store_path", "edgeplan_home"]

#: Environment variable that chooses the edgeplan home folder.
HOME_ENV = "EDGEPLAN_HOME"
#: File name of the default Store inside the home folder.
STORE_FILENAME = "store.sqlite"


def edgeplan_home(override: str | os.PathLike[str] | None = None) -> Path:
    """The folder that holds the default Store and other user data.

    Parameters
    ----------
    override
        A folder given explicitly (the CLI's ``--home``); wins over everything else.

    Returns
    -------
    Path
        ``override``, else ``$EDGEPLAN_HOME`` (when set and non-empty), else
        ``platformdirs.user_cache_dir("edgeplan")``; ``~`` is expanded. The folder is not created.
    """
    if override is not None and os.fspath(override) != "":
        return Path(override).expanduser()
    from_env = os.environ.get(HOME_ENV, "")
    if from_env:
        return Path(from_env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("edgeplan"))


def default_store_path(home: str | os.PathLike[str] | None = None) -> Path:
    """Path of the default Store file, ``home / "store.sqlite"``.

    Parameters
    ----------
    home
        The home folder; ``None`` resolves it with :func:`edgeplan_home`.

    Returns
    -------
    Path
    """
    return edgeplan_home(home) / STORE_FILENAME

"""The parameter half of the scikit-learn estimator contract, shared by every edgeplan cost model.

An estimator's ``__init__`` stores its keyword arguments under their own names and does nothing else; the class
lists them in ``_param_names``. :class:`EstimatorParams` then gives ``get_params`` (exactly those arguments, as
stored, so that :func:`sklearn.base.clone` rebuilds an equal unfitted copy), ``set_params`` and a ``repr``,
without importing scikit-learn.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from edgeplan.errors import InvalidInputError

__all__ = ["EstimatorParams"]


class EstimatorParams:
    """``get_params``, ``set_params`` and ``repr`` from the constructor arguments named in ``_param_names``."""

    _param_names: ClassVar[tuple[str, ...]] = ()

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's keyword arguments and their current values.

        Parameters
        ----------
        deep
            Accepted for scikit-learn; no parameter is itself an estimator.

        Returns
        -------
        dict
            Name -> value, the values as stored (not copied or converted).
        """
        return {name: getattr(self, name) for name in self._param_names}

    def set_params(self, **params: Any) -> Self:
        """Set constructor arguments; a name the constructor does not take raises :class:`InvalidInputError`.

        Parameters
        ----------
        **params
            Name -> new value.

        Returns
        -------
        Self
            ``self``, with the new values (a fitted estimator keeps its learnt state until it is fitted again).
        """
        unknown = [name for name in params if name not in self._param_names]
        if unknown:
            raise InvalidInputError(f"{type(self).__name__} has no parameter {', '.join(map(repr, unknown))}; "
                                    f"valid: {', '.join(self._param_names)}")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

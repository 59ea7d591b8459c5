"""Contact layer: coal collision detection -> contact frames and Jacobians (:mod:`contact.detection`,
:mod:`contact.kinematics`), and one adapter per contact model (:mod:`contact.adapter`): the boxed
LCP (:mod:`contact.lcp`), the Coulomb NCP (:mod:`contact.ncp`), the relaxed model
(:mod:`contact.relaxed`) and compliant penalty contact (:mod:`contact.penalty`), each with ``solve``
and the optimality residual every implicit derivative comes from."""

from contact.adapter import (ContactAdapter, Linearization, RowLayout, fixed_impulse_velocity_derivative,
                             lambda_jacobian, velocity_jacobian)
from contact.lcp import LCPAdapter
from contact.ncp import NCPAdapter
from contact.penalty import PenaltyAdapter, PenaltyParameters
from contact.relaxed import RelaxedAdapter

#: The contact models a simulator can use (``contact=``).
CONTACT_MODELS = ("lcp", "ncp", "relaxed", "penalty")

__all__ = ["CONTACT_MODELS", "ContactAdapter", "LCPAdapter", "Linearization", "NCPAdapter", "PenaltyAdapter",
           "PenaltyParameters", "RelaxedAdapter", "RowLayout", "adapter", "fixed_impulse_velocity_derivative", "lambda_jacobian", "velocity_jacobian"]


def adapter(contact: str, *, smoothing: float = 0.0, smoothing_distance: float = 0.05,
            penalty: PenaltyParameters | None = None, dt: float | None = None) -> ContactAdapter:
    """The adapter of contact model ``contact``: relaxed whenever ``smoothing`` (kappa) > 0 (friction by
    the cone for ``"ncp"``/``"relaxed"``, by the pyramid for ``"lcp"``), else the hard LCP or NCP;
    ``"penalty"``: compliant contact with ``penalty`` (default parameters when None) at time step ``dt``."""
    if contact not in CONTACT_MODELS:
        raise ValueError(f"unknown contact model {contact!r}; available: {', '.join(CONTACT_MODELS)}")
    if contact == "penalty":
        if smoothing > 0:
            raise ValueError("contact='penalty' is smooth already: smoothing (kappa) applies to the hard models "
                             "('lcp', 'ncp') and 'relaxed'")
        if dt is None:
            raise ValueError("contact='penalty' needs the time step dt")
        return PenaltyAdapter(penalty or PenaltyParameters(), dt)
    if smoothing > 0:
        return RelaxedAdapter(smoothing, smoothing_distance, cone=contact in ("ncp", "relaxed"))
    if contact == "relaxed":
        raise ValueError("contact='relaxed' needs smoothing > 0 (kappa = 0 is contact='ncp')")
    return NCPAdapter() if contact == "ncp" else LCPAdapter()

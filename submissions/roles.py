"""Roles are Django groups: reviewers see their assigned submissions, hiring leads see all."""

from __future__ import annotations

from typing import Any

REVIEWERS = "reviewers"
HIRING_LEADS = "hiring_leads"


def is_hiring_lead(user: Any) -> bool:
    """True for members of the hiring-leads group and for superusers."""
    if not getattr(user, "is_authenticated", False):
        return False
    if user.is_superuser:
        return True
    cached = getattr(user, "_cr_is_lead", None)
    if cached is None:
        cached = user.groups.filter(name=HIRING_LEADS).exists()
        user._cr_is_lead = cached
    return cached


def may_spend(user: Any) -> bool:
    """Who may spend the team's model budget (a live spot check): hiring leads and
    reviewers, never a viewer (the demo's) or a user in neither group."""
    if is_hiring_lead(user):
        return True
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(user.groups.filter(name=REVIEWERS).exists())

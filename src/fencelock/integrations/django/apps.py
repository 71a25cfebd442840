"""The Django app: its label (``fencelock``) and name."""

from __future__ import annotations

from django.apps import AppConfig


class FencelockConfig(AppConfig):
    """``INSTALLED_APPS = [..., "fencelock.integrations.django"]``."""

    name = "fencelock.integrations.django"
    label = "fencelock"
    verbose_name = "fencelock"
    default_auto_field = "django.db.models.BigAutoField"

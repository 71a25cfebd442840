"""A minimal Django project for the fencelock example: one app, SQLite, no admin.

DJANGO_SETTINGS_MODULE=examples.django_shop.settings python -m django migrate --run-syncdb
"""

from __future__ import annotations

import os

SECRET_KEY = "example-only"  # noqa: S105 - an example app; a real one reads its own
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["fencelock.integrations.django", "examples.django_shop.shop"]
ROOT_URLCONF = "examples.django_shop.urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_DB", "shop.sqlite3"),
    }
}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
FENCELOCK_URL = os.environ.get("FENCELOCK_URL")  # locks() connects here; None: the default

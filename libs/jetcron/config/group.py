"""The base of every group of settings: a field's docstring is its description (docs/settings.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SettingsGroup(BaseModel):
    """Fields that answer one question; `jetcron.config.Settings` inherits every group and reads them from JETCRON_*
    environment variables."""

    model_config = ConfigDict(use_attribute_docstrings=True)

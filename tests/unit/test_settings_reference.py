"""docs/settings.md is generated from the settings class: a setting added without it, or a stale page, fails."""

from __future__ import annotations

from pathlib import Path

from jetcron.config import Settings, reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def test_the_settings_reference_is_current() -> None:
    assert DOC.read_text() == reference(), "docs/settings.md is stale: python -m jetcron.config > docs/settings.md"


def test_every_setting_says_what_it_is_for() -> None:
    undocumented = [name for name, field in Settings.model_fields.items() if not field.description]
    assert undocumented == []

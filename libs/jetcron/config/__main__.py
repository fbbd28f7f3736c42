"""`python -m jetcron.config > docs/settings.md`: the settings reference, generated."""

from __future__ import annotations

import sys

from jetcron.config import reference

sys.stdout.write(reference())

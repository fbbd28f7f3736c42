"""`python -m jetcron_services.gateway.contract docs/rest-api.md`: writes the table of operations into the doc."""

from __future__ import annotations

import sys

from jetcron_services.gateway.contract._reference import write_reference

write_reference(sys.argv[1])

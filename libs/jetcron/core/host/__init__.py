"""What a run's child gets on its host, decided before anything is done: its view of the job, its launch, its user
id, its environment's names, a simulated run. Pure: no I/O.

Each module's public names are re-exported here, loaded on first use: importing one module of the group
loads that module alone."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jetcron.core.host.env_names import (
        CONTAINER_CLI as CONTAINER_CLI,
    )
    from jetcron.core.host.env_names import (
        CONTAINER_CLI_PREFIXES as CONTAINER_CLI_PREFIXES,
    )
    from jetcron.core.host.env_names import (
        ENGINE as ENGINE,
    )
    from jetcron.core.host.env_names import (
        ENGINE_PREFIXES as ENGINE_PREFIXES,
    )
    from jetcron.core.host.env_names import (
        INTERPRETER as INTERPRETER,
    )
    from jetcron.core.host.env_names import (
        JETCRON_PREFIXES as JETCRON_PREFIXES,
    )
    from jetcron.core.host.env_names import (
        LOADER as LOADER,
    )
    from jetcron.core.host.env_names import (
        LOADER_PREFIXES as LOADER_PREFIXES,
    )
    from jetcron.core.host.env_names import (
        OWN as OWN,
    )
    from jetcron.core.host.env_names import (
        SHELL as SHELL,
    )
    from jetcron.core.host.env_names import (
        refusal as refusal,
    )
    from jetcron.core.host.job_view import (
        PRIVATE_TMP as PRIVATE_TMP,
    )
    from jetcron.core.host.job_view import (
        SCRATCH_MODE as SCRATCH_MODE,
    )
    from jetcron.core.host.job_view import (
        SCRATCH_PARENT_MODE as SCRATCH_PARENT_MODE,
    )
    from jetcron.core.host.job_view import (
        ChildView as ChildView,
    )
    from jetcron.core.host.job_view import (
        data_dir_mode as data_dir_mode,
    )
    from jetcron.core.host.job_view import (
        first_blocked as first_blocked,
    )
    from jetcron.core.host.launch_plan import (
        LABEL_AGENT as LABEL_AGENT,
    )
    from jetcron.core.host.launch_plan import (
        HostFacts as HostFacts,
    )
    from jetcron.core.host.launch_plan import (
        Launch as Launch,
    )
    from jetcron.core.host.launch_plan import (
        container_cli_env as container_cli_env,
    )
    from jetcron.core.host.launch_plan import (
        container_name as container_name,
    )
    from jetcron.core.host.launch_plan import (
        gpu_args as gpu_args,
    )
    from jetcron.core.host.launch_plan import (
        passed_to_container as passed_to_container,
    )
    from jetcron.core.host.launch_plan import (
        run_argv as run_argv,
    )
    from jetcron.core.host.launch_plan import (
        runtime_name as runtime_name,
    )
    from jetcron.core.host.sim import DURATIONS as DURATIONS
    from jetcron.core.host.sim import SimExecution as SimExecution
    from jetcron.core.host.uid_pool import (
        LOCAL_RANGES as LOCAL_RANGES,
    )
    from jetcron.core.host.uid_pool import (
        MAX_UID as MAX_UID,
    )
    from jetcron.core.host.uid_pool import (
        UidPool as UidPool,
    )
    from jetcron.core.host.uid_pool import (
        format_uid_range as format_uid_range,
    )
    from jetcron.core.host.uid_pool import (
        local_range as local_range,
    )
    from jetcron.core.host.uid_pool import (
        parse_uid_range as parse_uid_range,
    )
    from jetcron.core.host.uid_pool import (
        usable_uids as usable_uids,
    )

_HOME = {
    "CONTAINER_CLI": "env_names",
    "CONTAINER_CLI_PREFIXES": "env_names",
    "ChildView": "job_view",
    "DURATIONS": "sim",
    "ENGINE": "env_names",
    "ENGINE_PREFIXES": "env_names",
    "HostFacts": "launch_plan",
    "INTERPRETER": "env_names",
    "JETCRON_PREFIXES": "env_names",
    "LABEL_AGENT": "launch_plan",
    "LOADER": "env_names",
    "LOADER_PREFIXES": "env_names",
    "LOCAL_RANGES": "uid_pool",
    "Launch": "launch_plan",
    "MAX_UID": "uid_pool",
    "OWN": "env_names",
    "PRIVATE_TMP": "job_view",
    "SCRATCH_MODE": "job_view",
    "SCRATCH_PARENT_MODE": "job_view",
    "SHELL": "env_names",
    "SimExecution": "sim",
    "UidPool": "uid_pool",
    "container_cli_env": "launch_plan",
    "container_name": "launch_plan",
    "data_dir_mode": "job_view",
    "first_blocked": "job_view",
    "format_uid_range": "uid_pool",
    "gpu_args": "launch_plan",
    "local_range": "uid_pool",
    "parse_uid_range": "uid_pool",
    "passed_to_container": "launch_plan",
    "refusal": "env_names",
    "run_argv": "launch_plan",
    "runtime_name": "launch_plan",
    "usable_uids": "uid_pool",
}
"""Where each re-exported name is defined, by module of jetcron.core.host."""

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)

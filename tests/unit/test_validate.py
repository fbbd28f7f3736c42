"""Bad input gets an error that names the field and the value; any input gives InvalidSpec or a spec, never a crash."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetcron.core.errors import InvalidSpec
from jetcron.core.validate import decode_spec, parse_json_object, validate_spec

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def check(spec: dict[str, Any]) -> None:
    validate_spec(decode_spec(spec), now=NOW, jobs={})


def ok(**extra: Any) -> dict[str, Any]:
    return {"name": "job", "command": ["true"], **extra}


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        pytest.param(
            ok(schedule={"kind": "cron", "cron": "61 * * * *"}), r"schedule\.cron: .*61 \* \* \* \*", id="bad_cron"
        ),
        pytest.param(ok(timout=3), r"spec\.timout: unknown field \(got 3\)", id="unknown_field"),
        pytest.param(ok(resources={"cpu": -1}), r"resources\.cpu: must be > 0 .*\(got -1", id="negative_cpu"),
        pytest.param(
            ok(schedule={"kind": "cron", "cron": "* * * * *", "tz": "Mars/Olympus"}),
            r"schedule\.tz: .*Mars/Olympus",
            id="unknown_zone",
        ),
        pytest.param(ok(env={"LD_PRELOAD": "/x.so"}), r"env\.LD_PRELOAD: is read by the dynamic loader",
                     id="ld_preload"),
        *(pytest.param(ok(env={name: "x"}), rf"env\.{name}: is read by the dynamic loader or libc", id=name.lower())
          for name in ("GCONV_PATH", "LOCPATH", "NLSPATH", "GLIBC_TUNABLES", "MALLOC_ARENA_MAX", "HOSTALIASES",
                       "RES_OPTIONS", "LOCALDOMAIN", "TZDIR")),
        *(pytest.param(ok(secrets=[name]), r"secrets\[0\]: would change how a shell", id=f"secret_{name.lower()}")
          for name in ("BASHOPTS", "CDPATH", "BASH_ENV")),
        *(pytest.param(ok(env={name: "x"}), rf"env\.{name}: would point a container CLI at another engine",
                       id=name.lower())
          for name in ("DOCKER_HOST", "DOCKER_CONFIG", "CONTAINER_HOST", "CONTAINERS_CONF")),
        *(pytest.param(ok(image="alpine:3", env={name: "x"}), rf"env\.{name}: is read by the container CLI",
                       id=f"image_{name.lower()}") for name in ("PATH", "HOME", "XDG_CONFIG_HOME", "HTTPS_PROXY")),
        pytest.param(ok(env={"JETCRON_RUN_ID": "x"}), r"env\.JETCRON_RUN_ID", id="jetcron_env"),
        pytest.param(ok(name="a.b"), r"name: must be .*\(got 'a\.b'\)", id="dot_in_name"),
        pytest.param(ok(name="x" * 64), r"name: must be", id="name_too_long"),
        pytest.param(ok(command=[]), r"command: must name a program", id="empty_command"),
        pytest.param(ok(command=["a\x00b"]), r"command\[0\]: contains a NUL", id="nul_in_arg"),
        pytest.param(ok(retry={"max_attempts": 0}), r"retry\.max_attempts: must be >= 1", id="zero_attempts"),
        pytest.param(ok(timeout_seconds=0), r"timeout_seconds: must be > 0", id="zero_timeout"),
        pytest.param(ok(resources={"cpu": 10**30}), r"resources\.cpu: must be > 0 and <= 1024", id="huge_cpu"),
        pytest.param(
            ok(resources={"hosts": 2}), r"resources\.hosts: multi-host gangs are for GPU jobs", id="gang_without_gpu"
        ),
        pytest.param(ok(depends_on=["job"]), r"depends_on: .*itself", id="self_dependency"),
        pytest.param(ok(depends_on=["ghost"]), r"depends_on: .*ghost", id="unknown_upstream"),
        pytest.param(ok(require={"zone": "eu west"}), r"require\.zone", id="bad_label"),
        pytest.param(
            ok(schedule={"kind": "every", "every_seconds": 0.01}), r"schedule\.every_seconds", id="too_frequent"
        ),
        pytest.param(ok(schedule={"kind": "cron", "cron": "0 0 30 2 *"}), r"schedule\.cron: .*never", id="never_fires"),
    ],
)
def test_invalid_specs_name_the_field_and_value(spec: dict[str, Any], pattern: str) -> None:
    with pytest.raises(InvalidSpec, match=pattern):
        check(spec)


def test_a_process_jobs_own_path_home_tmpdir_and_proxy_are_its_own() -> None:
    # Read by nothing but the job's program where it runs as a process (an image run's CLI would read them)
    check(ok(env={"PATH": "/opt/x/bin", "HOME": "/h", "TMPDIR": "/t", "HTTPS_PROXY": "http://proxy:3128",
                  "XDG_CONFIG_HOME": "/c"}))


@pytest.mark.parametrize(
    ("body", "pattern"),
    [
        pytest.param(b'{"a": 1, "a": 2}', r"a: duplicate key", id="duplicate_key"),
        pytest.param(b'{"a": NaN}', r"NaN and infinities", id="nan"),
        pytest.param(b"\xff\xfe", r"body: not valid UTF-8", id="bad_utf8"),
        pytest.param(b"[1, 2]", r"body: must be a JSON object", id="not_object"),
        pytest.param(b"{" * 20 + b"}" * 20, r"body: not valid JSON|nested deeper", id="deep"),
        pytest.param(json.dumps({"a": [[[[[[[[[1]]]]]]]]]}).encode(), r"nested deeper than 8", id="too_deep"),
        pytest.param(b" " * 70000, r"larger than 65536 bytes", id="too_big"),
    ],
)
def test_bodies_are_parsed_strictly(body: bytes, pattern: str) -> None:
    with pytest.raises(InvalidSpec, match=pattern):
        parse_json_object(body)


def test_a_good_spec_passes() -> None:
    check(ok(schedule={"kind": "cron", "cron": "30 1 * * *", "tz": "America/New_York"}, env={"GREETING": "hi"}))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
fields = st.sampled_from(
    [
        "name",
        "command",
        "schedule",
        "env",
        "resources",
        "retry",
        "timeout_seconds",
        "priority",
        "tenant",
        "depends_on",
        "require",
        "overlap",
        "misfire",
        "jitter",
        "image",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(fields, json_values, max_size=6))
def test_any_input_is_a_spec_or_a_named_error(data: dict[str, Any]) -> None:
    body = json.dumps(data).encode()
    try:
        check(parse_json_object(body))
    except InvalidSpec as exc:
        assert exc.field and str(exc)

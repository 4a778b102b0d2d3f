"""bus.toml is outside input: whatever a registry file holds for the settings issue 12 and 13
added (``[groups]``, the ``attach_*`` limits, ``hold``, ``new_threads_per_hour``), parse_bus either
returns a Bus whose values have the documented shapes or refuses with one ConfigError line."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.config import registry
from agentmail.errors import ConfigError

from ..depth import examples

# What TOML can hold: scalars, lists, tables, nested.
TOML = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
KEYS = st.sampled_from(
    [
        "groups",
        "attach_max_bytes",
        "attach_max_total",
        "attach_max_count",
        "attach_types",
        "hold",
        "new_threads_per_hour",
    ]
)


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(KEYS, TOML, max_size=4))
def test_any_value_for_the_new_settings_is_a_bus_or_one_config_error(values: dict[str, object]) -> None:
    try:
        bus = registry.parse_bus({"domain": "bus.test", **values})
    except ConfigError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    for name, members in bus.groups:
        assert isinstance(name, str) and members and all(isinstance(m, str) for m in members)
        assert len(set(members)) == len(members)
    for limit in (bus.attach_max_bytes, bus.attach_max_total, bus.attach_max_count, bus.new_threads_per_hour):
        assert isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0
    assert all(isinstance(t, str) and "/" in t for t in bus.attach_types)
    assert all(isinstance(h, str) for h in bus.hold)

"""Module settings reach the chart where its templates read them (under .Values.isvc)."""

from __future__ import annotations

from isvc_testbed.module import chart_values


def test_settings_are_nested_under_the_module_key_where_the_chart_reads_them() -> None:
    values = chart_values({"catalog": {"mode": "None"}})
    assert values["isvc"]["catalog"] == {"mode": "None"}
    assert "catalog" not in values


def test_the_test_domain_is_kept_unless_a_setting_overrides_it() -> None:
    assert chart_values()["isvc"]["publicDomainTemplate"] == "%s.example.test"
    assert chart_values({"publicDomainTemplate": "%s.other.test"})["isvc"]["publicDomainTemplate"] == (
        "%s.other.test"
    )
